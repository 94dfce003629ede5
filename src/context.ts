/**
 * AppContext: everything a request handler may use, built once at start and passed to `buildApp`.
 * Nothing in the service imports these as globals, so tests build as many contexts as they like.
 */
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { type JwtKeys, KeyError, loadJwtKeys } from './auth/keys.ts';
import { type Config, ConfigError } from './config.ts';
import { type Database, openPglite, openPostgres } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { cookieSecret } from './http/cookies.ts';
import { createMailer, type Mailer } from './mail/mailer.ts';
import { createObjectStore } from './storage/backends/index.ts';
import { type ObjectStore, StoreUnavailable } from './storage/backends/object-store.ts';
import { ImageService } from './storage/images/service.ts';
import { loadRules, RulesFileError, type StorageRules } from './storage/rules/rules.ts';

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
  readonly mailer: Mailer;
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

/**
 * Loads keys and secrets and reads the storage rules, then opens the database (migrating it). Everything
 * that can be wrong without a database is checked first and reported together as one ConfigError, so a
 * start that is going to fail never touches the database.
 */
export async function createContext(config: Config, opts: ContextOptions): Promise<AppContext> {
  const problems: string[] = [];
  const attempt = async <T>(what: () => T | Promise<T>): Promise<T | undefined> => {
    try {
      return await what();
    } catch (err) {
      if (!(err instanceof KeyError || err instanceof RulesFileError || isFileError(err))) throw err;
      problems.push((err as Error).message);
      return undefined;
    }
  };
  const keys = await attempt(() => loadJwtKeys(config, { now: (opts.clock ?? systemClock).now() }));
  const secret = await attempt(() => cookieSecret(config));
  const rules = config.STORAGE_ENABLED
    ? await attempt(() => loadRules(config.STORAGE_RULES_PATH))
    : undefined;
  if (problems.length > 0 || !keys || secret === undefined) throw new ConfigError(problems);
  opts.log.info({ algorithm: keys.algorithm, source: keys.source }, 'access-token key loaded');

  const db =
    opts.db ??
    (config.DATABASE_URL
      ? openPostgres(config.DATABASE_URL, config.DATABASE_POOL_SIZE)
      : await openPglite(path.join(config.DATA_DIR, 'db')));
  try {
    const applied = await migrate(db);
    if (applied.length > 0) opts.log.info({ migrations: applied }, 'database schema migrated');
    const mailer = createMailer(config, { log: opts.log });
    const storage = rules ? await openStorage(config, rules, opts.log) : undefined;
    return {
      config,
      db,
      clock: opts.clock ?? systemClock,
      keys,
      cookieSecret: secret,
      mailer,
      storage,
    };
  } catch (err) {
    if (!opts.db) await db.close().catch(() => {});
    throw err;
  }
}

/** A key or secret file that cannot be read or written (permissions, a folder in its place). */
function isFileError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'EACCES' || code === 'EPERM' || code === 'EISDIR' || code === 'ENOTDIR' || code === 'EROFS';
}

/** The store (the rules are already loaded); an unreachable S3 only warns. */
async function openStorage(
  config: Config,
  rules: StorageRules,
  log: FastifyBaseLogger,
): Promise<StorageContext> {
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
  await ctx.mailer.close();
  await ctx.storage?.objects.close();
  await ctx.db.close();
}
