/**
 * Databases for tests: in-memory PGlite always, and a fresh PostgreSQL database per call when
 * TEST_DATABASE_URL is set (`.ci/run` sets it), so every database suite runs on both.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Database, openPglite, openPostgres } from '../../src/db/database.ts';
import { loadMigrations, migrate } from '../../src/db/migrate.ts';
import { runsHere } from './requirements.ts';

export type DbKind = 'pglite' | 'postgres';

const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'];

/**
 * The database kinds this run covers. Without TEST_DATABASE_URL the PostgreSQL runs of the calling file
 * are reported as skipped (see requirements.ts), not silently left out.
 */
export function dbKinds(): DbKind[] {
  return runsHere('postgres', 'the PostgreSQL runs') ? ['pglite', 'postgres'] : ['pglite'];
}

export interface TestDatabase {
  db: Database;
  /** A URL other processes (or a second pool) can use; undefined for PGlite. */
  url: string | undefined;
  drop(): Promise<void>;
}

const templates = new Map<string, Promise<Blob>>();

/**
 * A dump of a PGlite database, shared between test processes through a file in the temp folder: starting
 * PGlite from it takes a fraction of a fresh initdb. `migrated` templates are keyed by the migrations'
 * checksums, empty ones by the PGlite version.
 */
function pgliteTemplate(migrated: boolean): Promise<Blob> {
  const key = migrated
    ? `migrated-${createHash('sha256')
        .update(
          loadMigrations()
            .map((m) => m.checksum)
            .join(),
        )
        .digest('hex')
        .slice(0, 16)}`
    : `empty-${pgliteVersion()}`;
  let template = templates.get(key);
  if (!template) {
    template = (async () => {
      const file = path.join(tmpdir(), `gatehouse-pglite-template-${key}.tar`);
      if (existsSync(file)) return new Blob([readFileSync(file)]);
      const db = await openPglite(undefined);
      if (migrated) await migrate(db);
      const blob = await db.dump();
      await db.close();
      const partial = `${file}.${process.pid}.tmp`;
      writeFileSync(partial, Buffer.from(await blob.arrayBuffer()));
      renameSync(partial, file);
      return blob;
    })();
    templates.set(key, template);
  }
  return template;
}

function pgliteVersion(): string {
  // The package does not export its package.json; read the installed copy.
  const pkg = new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url);
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
}

/** A dump of a migrated PGlite database (to start an embedded database in a folder quickly). */
export function migratedPgliteDump(): Promise<Blob> {
  return pgliteTemplate(true);
}

/**
 * Test databases wait longer for a connection than the service's 5 s: on a loaded machine (a full run
 * beside other work) connecting can take that long, and the suites here are not about connect timeouts
 * (test/reliability/ sets its own).
 */
const CONNECT = { connectTimeoutMs: 30_000 };

/**
 * A fresh database: PGlite starts already migrated (from the template), PostgreSQL starts empty.
 * `empty: true` gives an unmigrated PGlite too (schema tests).
 */
export async function createTestDatabase(
  kind: DbKind,
  opts: { empty?: boolean } = {},
): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const db = await openPglite(undefined, await pgliteTemplate(!opts.empty));
    return { db, url: undefined, drop: () => db.close() };
  }
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `gatehouse_test_${randomBytes(6).toString('hex')}`;
  const admin = openPostgres(TEST_DATABASE_URL, 1, CONNECT);
  await admin.exec(`CREATE DATABASE ${name}`);
  await admin.close();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const db = openPostgres(url.toString(), 5, CONNECT);
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      const a = openPostgres(TEST_DATABASE_URL, 1, CONNECT);
      await a.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.close();
    },
  };
}
