/**
 * The composition root. AppContext holds everything the service opens at start (database, keys, mailer,
 * object store), built once by `createContext` and passed to `buildApp`, which hands each feature the
 * narrow part it uses (`authDeps`, storage's `StorageDeps`). Start-up work against the database (schema
 * checks, roles, MFA re-encryption) runs here, before any route exists; `closeContext` closes it all.
 * Nothing in the service imports these as globals, so tests build as many contexts as they like.
 */
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { missingClaimsFunction } from './auth/custom-claims.ts';
import type { AuthDeps } from './auth/deps.ts';
import { emailCodeStep } from './auth/flows/email-otp.ts';
import { magicLoginStep } from './auth/flows/magic-link.ts';
import { passwordResetStep } from './auth/flows/password-reset.ts';
import { activationResendStep } from './auth/flows/registration.ts';
import { type JwtKeys, KeyError, loadJwtKeys } from './auth/keys.ts';
import { SecretBox } from './auth/mfa/secret-box.ts';
import { ProviderRegistry } from './auth/oauth/registry.ts';
import { Passwords } from './auth/passwords.ts';
import { Revocations } from './auth/revocations.ts';
import type { SealedKind } from './auth/sealed-store.ts';
import { checkSealedKeys, ensureAuthSchema, resealMfaSecrets } from './auth/startup.ts';
import { type BackgroundTasks, backgroundTasks } from './background.ts';
import { type Clock, systemClock } from './clock.ts';
import { type Config, ConfigError } from './config.ts';
import { secureDataDir } from './data-dir.ts';
import { watchAvailability } from './db/availability.ts';
import { type Database, openPglite, openPostgres } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { pruneSecurityFeed } from './events/feed.ts';
import { cookieSecret } from './http/cookies.ts';
import { type Counters, openCounters } from './http/counters.ts';
import { addressBudget } from './mail/budget.ts';
import { createMailer, type Mailer } from './mail/mailer.ts';
import { EmailOutbox } from './mail/outbox.ts';
import { createObjectStore } from './storage/backends/index.ts';
import { type ObjectStore, StoreUnavailable } from './storage/backends/object-store.ts';
import { FileCatalog } from './storage/files.ts';
import { ImageService } from './storage/images/service.ts';
import { loadRules, RulesFileError, type StorageRules } from './storage/rules/rules.ts';
import { openSegments } from './storage/tus/open-segments.ts';
import { TusUploads } from './storage/tus/service.ts';
import { webhookDeliverer } from './webhooks/deliverer.ts';
import { WEBHOOK_KIND, Webhooks } from './webhooks/webhooks.ts';

/** How often the security feed's old events are deleted. */
const SECURITY_EVENTS_PRUNE_EVERY_MS = 3_600_000;

export interface AppContext {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
  readonly keys: JwtKeys;
  /** Password hashing threads, sized by this context's settings and stopped by closeContext. */
  readonly passwords: Passwords;
  readonly cookieSecret: string;
  /** Delivers one email (SMTP, or the development outbox folder); only the outbox's sender calls it. */
  readonly mailer: Mailer;
  /** The durable email outbox: the MailPort auth uses, and the sender that delivers what it holds. */
  readonly outbox: EmailOutbox;
  /** Work that runs after the response (flows that must answer the same for every address). */
  readonly tasks: BackgroundTasks;
  /** The rate limits' counters (memory or Redis), shared with the email budget; none when limits are off. */
  readonly counters: Counters | undefined;
  /**
   * The access tokens this instance refuses before their expiry (ended sessions, blocked accounts), kept
   * current from the database through LISTEN/NOTIFY.
   */
  readonly revocations: Revocations;
  /** The enabled sign-in providers (OAuth, OpenID Connect) with their discovery caches. */
  readonly providers: ProviderRegistry;
  /** Encrypts TOTP secrets at rest; undefined unless AUTH_ENABLED and MFA_ENABLED. */
  readonly mfaBox: SecretBox | undefined;
  /** The object store and access rules; undefined when STORAGE_ENABLED is false. */
  readonly storage: StorageContext | undefined;
  /** Queues webhook deliveries in a change's transaction (webhooks/); the outbox delivers them. */
  readonly webhooks: Webhooks;
}

export interface StorageContext {
  readonly objects: ObjectStore;
  readonly rules: StorageRules;
  /** Resumable uploads (TUS) at /storage/uploads, and their expiry sweep. */
  readonly tus: TusUploads;
  /** Image transforms of GET /storage/o/<file>, with their queue and variant cache. */
  readonly images: ImageService;
  /** The files table's state on this instance and its background repairs (storage/files.ts). */
  readonly catalog: FileCatalog;
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
  const clock = opts.clock ?? systemClock;
  // Before anything is read or written there: what another local user can read is tightened first.
  secureDataDir(config.DATA_DIR, opts.log);
  const keys = await attempt(() => loadJwtKeys(config, { now: clock.now() }));
  const secret = await attempt(() => cookieSecret(config));
  const mfaBox =
    config.AUTH_ENABLED && config.MFA_ENABLED ? await attempt(() => SecretBox.fromConfig(config)) : undefined;
  const providers = await attempt(() => new ProviderRegistry(config, clock));
  const rules = config.STORAGE_ENABLED
    ? await attempt(() => loadRules(config.STORAGE_RULES_PATH))
    : undefined;
  if (problems.length > 0 || !keys || secret === undefined || !providers) throw new ConfigError(problems);
  opts.log.info({ algorithm: keys.algorithm, source: keys.source }, 'access-token key loaded');

  const db = watchAvailability(
    opts.db ??
      (config.DATABASE_URL
        ? openPostgres(config.DATABASE_URL, config.DATABASE_POOL_SIZE)
        : await openPglite(path.join(config.DATA_DIR, 'db'))),
    opts.log,
  );
  let counters: Counters | undefined;
  try {
    const applied = await migrate(db);
    if (applied.length > 0) opts.log.info({ migrations: applied }, 'database schema migrated');
    if (config.AUTH_ENABLED) {
      await ensureAuthSchema({ config, db });
      const noClaimsFunction = await missingClaimsFunction(config, db);
      if (noClaimsFunction) opts.log.warn(noClaimsFunction);
      // Provider tokens are sealed with the MFA box's key (auth/flows/oauth.ts providerTokenBox).
      const sealing = mfaBox ?? (config.PROVIDER_TOKENS_STORED ? SecretBox.fromConfig(config) : undefined);
      if (sealing) {
        const kinds: SealedKind[] = [];
        if (mfaBox) kinds.push('totp', 'pending-totp');
        if (config.PROVIDER_TOKENS_STORED) kinds.push('provider-tokens');
        await checkSealedKeys({ config, db, box: sealing }, kinds);
      }
      if (mfaBox) await resealMfaSecrets({ db, box: mfaBox }, opts.log);
    }
    // Listening and loaded before any route exists: no request is served with a list that misses one.
    const revocations = new Revocations(db, clock, opts.log);
    await revocations.start();
    const mailer = createMailer(config, { log: opts.log });
    const tasks = backgroundTasks(opts.log);
    counters = await openCounters(config, () => clock.now().getTime(), opts.log);
    const budget = counters ? addressBudget(counters.store, config, opts.log) : undefined;
    const outbox = new EmailOutbox({ config, db, mailer, log: opts.log, later: tasks.later, budget });
    const webhooks = new Webhooks(config, clock, () => outbox.wake());
    if (config.WEBHOOK_URL.length > 0) outbox.deliver(WEBHOOK_KIND, webhookDeliverer(config));
    const storage = rules
      ? await openStorage(config, rules, opts.log, { db, clock, every: tasks.every })
      : undefined;
    // In the background: the first import of a store's objects, then the repair of cut-off uploads.
    if (storage) await storage.catalog.start({ config, db, clock, ...storage, webhooks }, opts.log);
    const ctx: AppContext = {
      config,
      db,
      clock,
      keys,
      passwords: new Passwords(config),
      cookieSecret: secret,
      mailer,
      outbox,
      tasks,
      counters,
      revocations,
      providers,
      mfaBox,
      storage,
      webhooks,
    };
    const deps = authDeps(ctx);
    outbox.handle('password-reset', (tx, input) => passwordResetStep(deps, tx, input));
    outbox.handle('activation-resend', (tx, input) => activationResendStep(deps, tx, input));
    outbox.handle('magic-link-login', (tx, input) => magicLoginStep(deps, tx, input));
    outbox.handle('email-otp', (tx, input) => emailCodeStep(deps, tx, input));
    // Emails left unsent by an earlier run (or another instance) go out now.
    outbox.start();
    // The security feed keeps SECURITY_EVENTS_RETENTION_DAYS; every instance prunes (idempotent, cheap).
    tasks.every('security-events-prune', SECURITY_EVENTS_PRUNE_EVERY_MS, async () => {
      await pruneSecurityFeed(db, clock, config.SECURITY_EVENTS_RETENTION_DAYS);
    });
    return ctx;
  } catch (err) {
    await counters?.store.close().catch(() => {});
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
  with_: { db: Database; clock: Clock; every: BackgroundTasks['every'] },
): Promise<StorageContext> {
  log.info({ rules: rules.source }, 'storage rules loaded');
  const objects = await createObjectStore(config);
  try {
    await objects.init();
  } catch (err) {
    if (!(err instanceof StoreUnavailable)) throw err;
    // Start anyway: /health/ready reports the store and storage requests answer 503 until it is back.
    log.error({ err }, 'the object store is unreachable; storage answers 503 until it is back');
  }
  if (objects.abortStaleUploads && config.S3_ABORT_UPLOADS_AFTER > 0) {
    // In the background: a large bucket's listing must not hold the start.
    void objects.abortStaleUploads(config.S3_ABORT_UPLOADS_AFTER).then(
      (aborted) => {
        if (aborted === undefined)
          log.info(
            'the object store does not list multipart uploads; abort stale ones with a lifecycle rule',
          );
        else if (aborted > 0) log.info({ aborted }, 'aborted multipart uploads left by a stopped instance');
      },
      (err: unknown) => log.warn({ err }, 'could not look for stale multipart uploads'),
    );
  }
  const images = new ImageService(config, log);
  const catalog = new FileCatalog();
  const segments = await openSegments(config, objects);
  const tus = new TusUploads({ config, objects, rules, images, catalog, segments, log, ...with_ });
  tus.start();
  return { objects, rules, images, catalog, tus };
}

/** The part of the context the auth routes and domain use. */
export function authDeps(ctx: AppContext): AuthDeps {
  const { config, db, clock, keys, passwords, outbox, revocations, webhooks } = ctx;
  return { config, db, clock, keys, passwords, mailer: outbox, revocations, webhooks };
}

/**
 * Closes what the context opened, users before what they use. The app (and its in-flight requests, which
 * hash passwords and queue emails) is closed first, by the caller. Then the sender: it claims nothing
 * more, releases the emails it has not handed to SMTP, and lets the deliveries handing over and the
 * deferred steps finish (they use the hashing pool, the counters, the mailer and the database). What is
 * still queued stays in the outbox for the next start or another instance.
 */
export async function closeContext(ctx: AppContext): Promise<void> {
  ctx.outbox.stop();
  ctx.tasks.stop();
  await ctx.tasks.idle();
  await ctx.mailer.close();
  await ctx.storage?.catalog.stop();
  await ctx.storage?.objects.close();
  await ctx.storage?.images.close();
  await ctx.passwords.close();
  await ctx.counters?.store.close();
  await ctx.revocations.stop();
  await ctx.db.close();
}
