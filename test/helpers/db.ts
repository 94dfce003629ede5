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

export type DbKind = 'pglite' | 'postgres';

const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'];

/** The database kinds this run covers. */
export function dbKinds(): DbKind[] {
  return TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
}

export interface TestDatabase {
  db: Database;
  /** A URL other processes (or a second pool) can use; undefined for PGlite. */
  url: string | undefined;
  drop(): Promise<void>;
}

let template: Promise<Blob> | undefined;

/**
 * A dump of a migrated PGlite database, shared through a file in the temp folder keyed by the
 * migrations' checksums: starting PGlite from it takes a fraction of a fresh initdb.
 */
function pgliteTemplate(): Promise<Blob> {
  template ??= (async () => {
    const key = createHash('sha256')
      .update(
        loadMigrations()
          .map((m) => m.checksum)
          .join(),
      )
      .digest('hex')
      .slice(0, 16);
    const file = path.join(tmpdir(), `gatehouse-pglite-template-${key}.tar`);
    if (existsSync(file)) return new Blob([readFileSync(file)]);
    const db = await openPglite(undefined);
    await migrate(db);
    const blob = await db.dump();
    await db.close();
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, Buffer.from(await blob.arrayBuffer()));
    renameSync(partial, file);
    return blob;
  })();
  return template;
}

/**
 * A fresh database: PGlite starts already migrated (from the template), PostgreSQL starts empty.
 * `empty: true` gives an unmigrated PGlite too (schema tests).
 */
export async function createTestDatabase(
  kind: DbKind,
  opts: { empty?: boolean } = {},
): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const db = opts.empty ? await openPglite(undefined) : await openPglite(undefined, await pgliteTemplate());
    return { db, url: undefined, drop: () => db.close() };
  }
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `gatehouse_test_${randomBytes(6).toString('hex')}`;
  const admin = openPostgres(TEST_DATABASE_URL, 1);
  await admin.exec(`CREATE DATABASE ${name}`);
  await admin.close();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const db = openPostgres(url.toString(), 5);
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      const a = openPostgres(TEST_DATABASE_URL, 1);
      await a.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.close();
    },
  };
}
