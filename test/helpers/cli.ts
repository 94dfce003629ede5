/**
 * The `gatehouse` command against an installation of its own (a DATA_DIR and a database). `bin` runs it
 * as an operator does: the real bin in a child process, with the environment given (nothing inherited
 * but PATH). `gatehouse` runs the same dispatcher (`runCli`) in the test process, with the environment,
 * working folder and standard input given: the same command code without the 1.5 s of starting node and
 * tsx each time, which made the CLI suites the slowest of `npm test`. Each suite keeps a few `bin` runs,
 * so the bin itself, its exit codes and its streams stay covered.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.ts';
import type { CliIO } from '../../src/cli/command.ts';
import { runCli } from '../../src/cli/main.ts';
import { loadConfig } from '../../src/config.ts';
import { type AppContext, closeContext, createContext } from '../../src/context.ts';
import { type Database, openPglite, openPostgres } from '../../src/db/database.ts';
import { tempDir } from './app.ts';
import { createTestDatabase, type DbKind, migratedPgliteDump } from './db.ts';
import { REPO_ROOT } from './process.ts';

export const BIN = path.join(REPO_ROOT, 'bin/gatehouse.mjs');

export interface CliResult {
  code: number | null;
  out: string;
  err: string;
}

/** `gatehouse args` in this process, as `runGatehouse` runs it in a child. */
export async function runGatehouseHere(
  args: readonly string[],
  opts: { env: Record<string, string>; cwd: string },
): Promise<CliResult> {
  let out = '';
  let err = '';
  const io: CliIO = {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: { ...opts.env },
    cwd: opts.cwd,
    input: () => '',
    now: () => new Date(),
  };
  const code = await runCli([...args], io);
  return { code, out, err };
}

/** Cheap hashing, as the in-process suites use. */
export const CHEAP_ARGON2 = { ARGON2_MEMORY_COST: '1024', ARGON2_TIME_COST: '1' } as const;

export function runGatehouse(
  args: readonly string[],
  opts: { env: Record<string, string>; cwd: string; input?: string },
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: opts.cwd,
      env: { PATH: process.env['PATH'] ?? '', ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out, err }));
    child.stdin.end(opts.input ?? '');
  });
}

/**
 * An installation for the command line: a DATA_DIR and a database (the embedded PGlite in DATA_DIR/db,
 * started from a migrated template, or a fresh PostgreSQL database named by DATABASE_URL), the
 * command to run against it, and the service itself over the same database (`withService`). PGlite is
 * one process's at a time, so the service is opened and closed around each use.
 */
export interface CliInstallation {
  dataDir: string;
  env: Record<string, string>;
  /** The command, run in this process (see the top of this file). */
  gatehouse(...args: string[]): Promise<CliResult>;
  /** The real bin in a child process, `input` on its standard input. */
  bin(input: string, ...args: string[]): Promise<CliResult>;
  /** The service over the installation's database; `log` receives its log lines (default: none). */
  withService<T>(
    fn: (ctx: AppContext, app: Awaited<ReturnType<typeof buildApp>>) => Promise<T>,
    log?: FastifyBaseLogger,
  ): Promise<T>;
  close(): Promise<void>;
}

export async function cliInstallation(
  kind: DbKind,
  settings: Record<string, string> = {},
): Promise<CliInstallation> {
  const dataDir = tempDir('gatehouse-cli-');
  let url: string | undefined;
  let drop = async () => {};
  if (kind === 'pglite') {
    const db = await openPglite(path.join(dataDir, 'db'), await migratedPgliteDump());
    await db.close();
  } else {
    const made = await createTestDatabase('postgres');
    await made.db.close();
    url = made.url;
    drop = made.drop;
  }
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ...CHEAP_ARGON2,
    ...(url ? { DATABASE_URL: url } : {}),
    ...settings,
  };
  const openDb = async (): Promise<Database> =>
    url ? openPostgres(url, 2) : openPglite(path.join(dataDir, 'db'));
  return {
    dataDir,
    env,
    gatehouse: (...args) => runGatehouseHere(args, { env, cwd: dataDir }),
    bin: (input, ...args) => runGatehouse(args, { env, cwd: dataDir, input }),
    async withService(fn, log) {
      const db = await openDb();
      const config = loadConfig({ ...env, CUSTOM_DIR: path.join(dataDir, 'custom') });
      const ctx = await createContext(config, { log: log ?? pino({ level: 'silent' }), db });
      const app = await buildApp(ctx, { logger: log ?? false });
      try {
        await app.ready();
        return await fn(ctx, app);
      } finally {
        await app.close();
        await closeContext(ctx);
      }
    },
    async close() {
      await drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
