/**
 * Builds the real app for a test: explicit config (no environment), a fresh database of the given kind,
 * a temporary DATA_DIR, cheap argon2 parameters, and an injectable clock.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyBaseLogger, FastifyInstance, RouteOptions } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { keyFiles } from '../../src/auth/key-material.ts';
import { type Config, configFrom } from '../../src/config.ts';
import { type AppContext, closeContext, createContext } from '../../src/context.ts';
import { TestClock } from './clock.ts';
import { createTestDatabase, type DbKind, type TestDatabase } from './db.ts';

export type ConfigOverrides = Parameters<typeof configFrom>[0];

export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
  config: Config;
  clock: TestClock;
  database: TestDatabase;
  dataDir: string;
  close(): Promise<void>;
}

export interface TestAppOptions {
  clock?: TestClock;
  /** Runs after the app's routes are registered and before `ready()`: add test-only routes here. */
  beforeReady?: (app: FastifyInstance) => void | Promise<void>;
  /** Sees every route as it is registered. */
  onRoute?: (route: RouteOptions) => void;
  /** A logger for the context and the app (tests that read the log lines); default: none. */
  log?: FastifyBaseLogger;
  /** A database to use instead of a fresh one of `kind` (reached through a proxy, say); closed by `close`. */
  database?: TestDatabase;
}

export function tempDir(prefix = 'gatehouse-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

/**
 * Development RSA keys for the apps of the suites, kept in a file in the temp folder and shared between
 * test processes. A fresh DATA_DIR makes the service generate a 2048-bit key at its first start, about
 * 150 ms of CPU (often more): a quarter of what building a further app costs, hundreds of times per
 * `npm test`. Within a process every app gets a key of its own (suites compare the tokens of two
 * installations), in the same order each run; the file grows when a process needs more. The generation
 * itself stays covered: the suites that pass their own DATA_DIR, the CLI and the process suites start
 * without a key.
 */
const RSA_POOL = path.join(tmpdir(), 'gatehouse-test-rsa-keys.json');
let rsaPool: string[] | undefined;
let rsaHandedOut = 0;

function readRsaPool(): string[] {
  try {
    const keys = JSON.parse(readFileSync(RSA_POOL, 'utf8')) as unknown;
    return Array.isArray(keys) ? keys.filter((k): k is string => typeof k === 'string') : [];
  } catch {
    return [];
  }
}

function nextRsaKey(): string {
  rsaPool ??= readRsaPool();
  const i = rsaHandedOut++;
  if (i >= rsaPool.length) {
    rsaPool = readRsaPool(); // another process may have added some meanwhile
    while (rsaPool.length <= i) {
      const pem = generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { format: 'pem', type: 'pkcs8' },
        publicKeyEncoding: { format: 'pem', type: 'spki' },
      }).privateKey.trim();
      rsaPool.push(pem);
    }
    const partial = `${RSA_POOL}.${process.pid}.tmp`;
    writeFileSync(partial, JSON.stringify(rsaPool), { mode: 0o600 });
    renameSync(partial, RSA_POOL);
  }
  return rsaPool[i] as string;
}

/** A 2048-bit RSA private key (PKCS #8 PEM) for a suite, a different one on each call in a process. */
export function testRsaKey(): string {
  return nextRsaKey();
}

/**
 * Puts a pooled key where the service keeps the key it generates (DATA_DIR/keys, as devSecret writes
 * it), when the app would generate one: an RSA algorithm, no JWT_KEY, no custom key file, not production.
 */
function provideDevKey(config: Config): void {
  if (!config.JWT_ALGORITHM.startsWith('RS') || config.JWT_KEY || config.isProduction) return;
  const files = keyFiles(config);
  if (!files.generated || existsSync(files.key)) return;
  mkdirSync(path.dirname(files.key), { recursive: true, mode: 0o700 });
  writeFileSync(files.key, `${nextRsaKey()}\n`, { mode: 0o600, flag: 'wx' });
}

export async function buildTestApp(
  kind: DbKind = 'pglite',
  overrides: ConfigOverrides = {},
  opts: TestAppOptions = {},
): Promise<TestApp> {
  const dataDir = overrides.DATA_DIR ?? tempDir();
  const config = configFrom({
    DATA_DIR: dataDir,
    CUSTOM_DIR: path.join(dataDir, 'custom'),
    LOG_LEVEL: 'silent',
    // Cheap hashing keeps suites fast; production parameters are the config defaults.
    ARGON2_MEMORY_COST: 1024,
    ARGON2_TIME_COST: 1,
    ...overrides,
  });
  // Only in a DATA_DIR of its own: a suite that passes one may be testing what a first start writes there.
  if (!overrides.DATA_DIR) provideDevKey(config);
  const clock = opts.clock ?? new TestClock(Date.now());
  const database = opts.database ?? (await createTestDatabase(kind));
  const log = opts.log ?? (await import('pino')).default({ level: 'silent' });
  let ctx: AppContext | undefined;
  let app: FastifyInstance | undefined;
  try {
    ctx = await createContext(config, { log, clock, db: database.db });
    app = await buildApp(ctx, { logger: opts.log ?? false, onRoute: opts.onRoute });
    await opts.beforeReady?.(app);
    await app.ready();
  } catch (err) {
    await app?.close().catch(() => {});
    await database.drop().catch(() => {});
    if (!overrides.DATA_DIR) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const started = { app, ctx };
  return {
    ...started,
    config,
    clock,
    database,
    dataDir,
    async close() {
      await started.app.close();
      await closeContext(started.ctx);
      await database.drop();
      if (!overrides.DATA_DIR) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
