/**
 * AppContext: everything a request handler may use, built once at start and passed to `buildApp`.
 * Nothing in the service imports these as globals, so tests build as many contexts as they like.
 */
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { type JwtKeys, loadJwtKeys } from './auth/keys.ts';
import { type BackgroundTasks, backgroundTasks } from './background.ts';
import type { Config } from './config.ts';
import { type Database, openPglite, openPostgres } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { cookieSecret } from './http/cookies.ts';
import { createMailer, type Mailer } from './mail/mailer.ts';
import { createObjectStore } from './storage/backends/index.ts';
import { type ObjectStore, StoreUnavailable } from './storage/backends/object-store.ts';
import { ImageService } from './storage/images/service.ts';
import { loadRules, type StorageRules } from './storage/rules/rules.ts';

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export interface AppContext {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
  readonly keys: JwtKeys;
  readonly cookieSecret: string;
  /** Sends the flows' emails (its `send` is the MailPort auth uses). */
  readonly mailer: Mailer;
  /** Work that runs after the response (flows that must answer the same for every address). */
  readonly tasks: BackgroundTasks;
  /** The object store and access rules; undefined when STORAGE_ENABLED is false. */
  readonly storage: StorageContext | undefined;
}

export interface StorageContext {
  readonly objects: ObjectStore;
  readonly rules: StorageRules;
  /** Image transforms of GET /storage/o/<file>, with their queue and variant cache. */
  readonly images: ImageService;
}

export interface ContextOptions {
  log: FastifyBaseLogger;
  clock?: Clock;
  /** An already open database (tests); otherwise opened from the config. */
  db?: Database;
}

/** Opens the database (migrating it), loads keys and secrets. */
export async function createContext(config: Config, opts: ContextOptions): Promise<AppContext> {
  const db =
    opts.db ??
    (config.DATABASE_URL
      ? openPostgres(config.DATABASE_URL, config.DATABASE_POOL_SIZE)
      : await openPglite(path.join(config.DATA_DIR, 'db')));
  try {
    const applied = await migrate(db);
    if (applied.length > 0) opts.log.info({ migrations: applied }, 'database schema migrated');
    const keys = await loadJwtKeys(config);
    opts.log.info({ algorithm: keys.algorithm, source: keys.source }, 'access-token key loaded');
    const mailer = createMailer(config, { log: opts.log });
    const storage = config.STORAGE_ENABLED ? await openStorage(config, opts.log) : undefined;
    return {
      config,
      db,
      clock: opts.clock ?? systemClock,
      keys,
      cookieSecret: cookieSecret(config),
      mailer,
      tasks: backgroundTasks(opts.log),
      storage,
    };
  } catch (err) {
    if (!opts.db) await db.close().catch(() => {});
    throw err;
  }
}

/** Rules first (a mistake in them stops the start), then the store; an unreachable S3 only warns. */
async function openStorage(config: Config, log: FastifyBaseLogger): Promise<StorageContext> {
  const rules = loadRules(config.STORAGE_RULES_PATH);
  log.info({ rules: rules.source }, 'storage rules loaded');
  const objects = createObjectStore(config);
  try {
    await objects.init();
  } catch (err) {
    if (!(err instanceof StoreUnavailable)) throw err;
    // Start anyway: /health/ready reports the store and storage requests answer 503 until it is back.
    log.error({ err }, 'the object store is unreachable; storage answers 503 until it is back');
  }
  return { objects, rules, images: new ImageService(config, log) };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  // Tasks still running use the mailer and the database.
  await ctx.tasks.idle();
  await ctx.mailer.close();
  await ctx.storage?.objects.close();
  await ctx.db.close();
}
