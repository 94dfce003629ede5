/**
 * The database as the commands open it: the service's (DATABASE_URL, or the embedded PGlite in
 * DATA_DIR/db, which the service must not be holding at the same time), brought up to date the way the
 * service does at start (migrations, then the configured roles in auth.roles), so that a command works
 * on a fresh installation as well as on a running one.
 */
import path from 'node:path';
import { ensureAuthSchema } from '../auth/startup.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { Config } from '../config.ts';
import { type Database, openPglite, openPostgres } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import { Webhooks } from '../webhooks/webhooks.ts';
import type { CliIO } from './command.ts';

export interface CliDatabase {
  config: Config;
  db: Database;
  clock: Clock;
  /** Migrations this opening applied (names). */
  applied: string[];
  /**
   * Webhooks of the changes a command makes, queued in their transactions; the service's sender delivers
   * them at its next poll (EMAIL_POLL_INTERVAL_MS).
   */
  webhooks: Webhooks;
}

/**
 * Opens the configured database without migrating it; inside the running service (`io.service`), its
 * open database, which the command's close leaves open.
 */
export async function openConfiguredDatabase(config: Config, io?: Pick<CliIO, 'service'>): Promise<Database> {
  const shared = io?.service?.db;
  if (shared)
    return {
      kind: shared.kind,
      query: (name, sql, params) => shared.query(name, sql, params),
      exec: (sql) => shared.exec(sql),
      transaction: (fn) => shared.transaction(fn),
      ping: () => shared.ping(),
      listen: (channel, handler) => shared.listen(channel, handler),
      close: async () => {},
    };
  return config.DATABASE_URL
    ? openPostgres(config.DATABASE_URL, 2)
    : await openPglite(path.join(config.DATA_DIR, 'db'));
}

/** Runs `fn` with the configured database, migrated and with its roles, and closes it afterwards. */
export async function withDatabase<T>(
  config: Config,
  fn: (d: CliDatabase) => Promise<T>,
  io?: Pick<CliIO, 'service'>,
): Promise<T> {
  const db = await openConfiguredDatabase(config, io);
  try {
    const applied = await migrate(db);
    if (config.AUTH_ENABLED) await ensureAuthSchema({ config, db });
    const webhooks = new Webhooks(config, systemClock, () => {});
    return await fn({ config, db, clock: systemClock, applied, webhooks });
  } finally {
    await db.close();
  }
}
