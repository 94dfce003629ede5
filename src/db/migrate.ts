/**
 * Applies `migrations/NNNN_name.sql` in order, all pending ones in one transaction under an advisory
 * lock, so that instances starting together neither race nor half-apply: a failing migration rolls the
 * schema back to what it was. Applied migrations are recorded with a checksum in auth.schema_migrations;
 * an applied file that has since changed stops the start. A migration is known by its name: a record
 * made under an older number is renumbered (see `renumber`).
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Database, Queryable } from './database.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Arbitrary constant shared by every Gatehouse instance: "gatehouse" in ASCII, truncated to int8. */
const LOCK_KEY = 0x67617465686f7573n;

const MIN_SERVER_VERSION = 130000;

export interface Migration {
  id: number;
  name: string;
  sql: string;
  checksum: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9-]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const sql = readFileSync(`${dir}/${file}`, 'utf8');
      return {
        id: Number(file.slice(0, 4)),
        name: file.slice(5, -4),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

/** Brings the schema up to date; returns the names of the migrations it applied. */
export async function migrate(db: Database, migrations = loadMigrations()): Promise<string[]> {
  const { rows: version } = await db.query<{ v: string }>(
    'server-version',
    "SELECT current_setting('server_version_num') AS v",
  );
  if (Number(version[0]?.v) < MIN_SERVER_VERSION) {
    throw new Error(
      `PostgreSQL 13 or newer is required (this server is ${version[0]?.v}); gen_random_uuid() is built in from 13`,
    );
  }
  return db.transaction(async (tx) => {
    await tx.query('migrate-lock', 'SELECT pg_advisory_xact_lock($1)', [LOCK_KEY.toString()]);
    await tx.exec(`
      CREATE SCHEMA IF NOT EXISTS auth;
      CREATE TABLE IF NOT EXISTS auth.schema_migrations (
        id integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      );`);
    const { rows } = await tx.query<{ id: number; name: string; checksum: string }>(
      'migrations-applied',
      'SELECT id, name, checksum FROM auth.schema_migrations ORDER BY id',
    );
    const applied = new Map((await renumber(tx, rows, migrations)).map((r) => [r.id, r]));
    const ran: string[] = [];
    for (const m of migrations) {
      const done = applied.get(m.id);
      if (done) {
        if (done.checksum !== m.checksum) {
          throw new Error(`migration ${m.id}_${m.name} was changed after it was applied (checksum differs)`);
        }
        continue;
      }
      await tx.exec(m.sql);
      await tx.query(
        'migration-record',
        'INSERT INTO auth.schema_migrations (id, name, checksum) VALUES ($1, $2, $3)',
        [m.id, m.name, m.checksum],
      );
      ran.push(`${m.id}_${m.name}`);
    }
    return ran;
  });
}

interface Applied {
  id: number;
  name: string;
  checksum: string;
}

/**
 * Moves records made under an older number to the number their file has now, keeping their checksum
 * and time: the numbering once had a gap (1, 2, 4, 5…), closed by renaming 0004_mfa to 0003_mfa and so
 * on, and databases migrated before that recorded the old numbers. Returns the records as they are then.
 */
async function renumber(tx: Queryable, rows: Applied[], migrations: Migration[]): Promise<Applied[]> {
  const idOf = new Map(migrations.map((m) => [m.name, m.id]));
  const moving = rows.filter((r) => idOf.has(r.name) && idOf.get(r.name) !== r.id);
  if (moving.length === 0) return rows;
  const staying = new Map(rows.filter((r) => !moving.includes(r)).map((r) => [r.id, r.name]));
  for (const r of moving) {
    const target = idOf.get(r.name) as number;
    if (staying.has(target))
      throw new Error(
        `cannot renumber migration ${r.id}_${r.name} to ${target}: ${target}_${staying.get(target)} is recorded there`,
      );
  }
  // Through negative numbers, so that no record lands on one that has not moved yet.
  for (const r of moving) {
    await tx.query('migration-renumber', 'UPDATE auth.schema_migrations SET id = $2 WHERE id = $1', [
      r.id,
      -(idOf.get(r.name) as number),
    ]);
  }
  await tx.query('migration-renumbered', 'UPDATE auth.schema_migrations SET id = -id WHERE id < 0');
  return rows.map((r) => (moving.includes(r) ? { ...r, id: idOf.get(r.name) as number } : r));
}
