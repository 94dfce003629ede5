/**
 * Builds the real app for a test: explicit config (no environment), a fresh database of the given kind,
 * a temporary DATA_DIR, cheap argon2 parameters, and an injectable clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyBaseLogger, FastifyInstance, RouteOptions } from 'fastify';
import { buildApp } from '../../src/app.ts';
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
