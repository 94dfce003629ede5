/**
 * `gatehouse migrate`: brings the database schema up to date and exits, as every instance does at start
 * (for deployments that migrate in a step of their own, before the new version starts).
 */
import { migrate as applyMigrations, loadMigrations } from '../../db/migrate.ts';
import { type CliIO, type Command, configOf, parseOptions } from '../command.ts';
import { openConfiguredDatabase } from '../database.ts';

const migrate: Command = {
  name: 'migrate',
  summary: 'Apply the database migrations and exit',
  help: `Usage: gatehouse migrate

Applies the pending migrations to the configured database (DATABASE_URL, or the embedded database in
DATA_DIR/db) in one transaction under the same lock the instances take at start, and prints their names.
A migration file changed after it was applied stops it (exit 1), as it would stop the start.`,
  async run(args: string[], io: CliIO) {
    parseOptions(args, {});
    const config = configOf(io);
    const db = await openConfiguredDatabase(config, io);
    try {
      const applied = await applyMigrations(db);
      for (const name of applied) io.out(`applied ${name}\n`);
      io.err(
        applied.length > 0
          ? `${applied.length} migration(s) applied; the schema is up to date (${loadMigrations().length} migrations)\n`
          : `nothing to apply: the schema is up to date (${loadMigrations().length} migrations)\n`,
      );
      return 0;
    } finally {
      await db.close();
    }
  },
};

export default migrate;
