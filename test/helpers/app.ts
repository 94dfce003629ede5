/**
 * Builds the real app for a test: explicit config (no environment), a fresh database of the given kind,
 * a temporary DATA_DIR, cheap argon2 parameters, and an injectable clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
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

export function tempDir(prefix = 'gatehouse-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

export async function buildTestApp(
  kind: DbKind = 'pglite',
  overrides: ConfigOverrides = {},
  opts: { clock?: TestClock } = {},
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
  const database = await createTestDatabase(kind);
  const silent = (await import('pino')).default({ level: 'silent' });
  const ctx = await createContext(config, { log: silent, clock, db: database.db });
  const app = await buildApp(ctx, { logger: false });
  await app.ready();
  return {
    app,
    ctx,
    config,
    clock,
    database,
    dataDir,
    async close() {
      await app.close();
      await closeContext(ctx);
      await database.drop();
      if (!overrides.DATA_DIR) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
