/**
 * What some suites need from the machine (a PostgreSQL server, Redis, a browser…), and how a suite that
 * cannot run here says so. A suite calls `runsHere(need, what)` where it would otherwise silently leave
 * itself out: when the need is not met, a skipped test named after `what`, carrying the reason, is
 * registered in its file, so node's summary counts it and the skip reporter (test/reporters/skips.ts)
 * lists it at the end of `npm test`. "skipped 0" then means that everything ran.
 *
 * Adding a need is one entry in NEEDS: a name, how to tell whether it is met, and what to set or install.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The test file this process runs (`node --test` gives each file a process of its own). */
function testFile(): string {
  const main = process.argv[1];
  return main ? path.relative(ROOT, main) : 'this process';
}

export interface Need {
  /** Undefined when met; otherwise why not, with what would make it met. */
  missing(): string | undefined;
}

const env = (name: string, what: string): Need => ({
  missing: () =>
    process.env[name] ? undefined : `${name} is not set (${what}; .ci/run sets it, see README "Test it")`,
});

/** A program on PATH. */
const program = (name: string, install: string): Need => ({
  missing: () =>
    (process.env['PATH'] ?? '').split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, name)))
      ? undefined
      : `${name} is not installed (${install})`,
});

export const NEEDS = {
  postgres: env('TEST_DATABASE_URL', 'a PostgreSQL URL whose user may create databases'),
  redis: env('REDIS_URL', 'a Redis URL'),
  'docker-compose': program('docker-compose', 'apt-get install -y docker-compose; .ci/run installs it'),
  chromium: program('chromium', 'apt-get install -y chromium; .ci/run installs it'),
  openssl: program('openssl', 'apt-get install -y openssl'),
} satisfies Record<string, Need>;

export type NeedName = keyof typeof NEEDS;

/** Registers `need` under another name (suites of other features add theirs: `chromium`, …). */
export function defineNeed(name: string, need: Need): void {
  (NEEDS as Record<string, Need>)[name] = need;
}

const reported = new Set<string>();

/**
 * True when `need` is met. Otherwise registers, once per `what` in this file, a skipped test named
 * `what` whose reason says what is missing, and returns false.
 */
export function runsHere(need: NeedName | (string & {}) | Need, what: string): boolean {
  const n = typeof need === 'string' ? (NEEDS as Record<string, Need>)[need] : need;
  if (!n) throw new Error(`unknown need ${String(need)}`);
  const reason = n.missing();
  if (reason === undefined) return true;
  if (!reported.has(what)) {
    reported.add(what);
    // Named with the test file: node reports a test where test() was called, which is here.
    test(`${what} (${testFile()})`, { skip: reason }, () => {});
  }
  return false;
}
