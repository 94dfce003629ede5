/**
 * Databases for tests: in-memory PGlite always, and a fresh PostgreSQL database per call when
 * TEST_DATABASE_URL is set (`.ci/run` sets it), so every database suite runs on both.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  type Database,
  DatabaseUnavailable,
  openPglite,
  openPostgres,
  type Subscription,
} from '../../src/db/database.ts';
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
    if (!opts.empty) return leasePglite();
    const db = await openPglite(undefined, await pgliteTemplate(false));
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

/**
 * Migrated PGlite databases are reused within a test process. Starting PGlite costs about 1.5 s of CPU
 * (the WebAssembly PostgreSQL boots and loads the template), over half of what a suite's app costs, and
 * `npm test` builds hundreds of them; returning one to its template state costs a few milliseconds.
 *
 * A database goes back to the pool only when it provably equals a fresh one: its schema (tables,
 * columns, indexes, constraints, functions, triggers, views, policies, roles, grants, extensions and
 * settings) has the template's fingerprint, and then every table is emptied and the rows the migrations
 * seed are put back, with the session reset (as `DISCARD ALL` does, its prepared statements aside) and
 * sequences as the template left them.
 * A suite that changed the schema gets it closed instead. Each user holds a lease: once the handle is
 * closed or dropped, it refuses every statement (as a closed database does), so a straggler of a closed
 * app can never write into the next suite's database.
 */
interface Pristine {
  fingerprint: string;
  tables: string[];
  seeds: { table: string; rows: string }[];
  sequences: { name: string; value: string | null }[];
}

const idle: (Database & { dump(): Promise<Blob> })[] = [];
const MAX_IDLE = 2;
/**
 * How long a returned database waits for the next suite. PostgreSQL in PGlite keeps a timer of its own
 * armed (statistics, every 10 s) that keeps the process alive; so an idle database is closed soon after,
 * and a test file still ends as soon as its last suite does. Suites follow each other in milliseconds.
 */
const IDLE_MS = 500;
let idleTimer: NodeJS.Timeout | undefined;

function closeIdleSoon(): void {
  clearTimeout(idleTimer);
  idleTimer = setTimeout(() => {
    for (const db of idle.splice(0)) void db.close().catch(() => {});
  }, IDLE_MS);
  idleTimer.unref();
}

let pristine: Promise<Pristine> | undefined;

const SYSTEM = "('pg_catalog', 'information_schema', 'pg_toast')";
const FINGERPRINT = `SELECT md5(string_agg(x, E'\\n' ORDER BY x)) AS f FROM (
  SELECT 'c ' || table_schema || '.' || table_name || '.' || column_name || ' ' || data_type || ' ' ||
    coalesce(column_default, '') || ' ' || is_nullable AS x
    FROM information_schema.columns WHERE table_schema NOT IN ${SYSTEM}
  UNION ALL SELECT 'i ' || indexdef FROM pg_indexes WHERE schemaname NOT IN ${SYSTEM}
  UNION ALL SELECT 'f ' || n.nspname || '.' || p.proname || ' ' || md5(coalesce(p.prosrc, ''))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ${SYSTEM}
  UNION ALL SELECT 't ' || tgrelid::regclass::text || ' ' || tgname || ' ' || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL SELECT 'k ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname IN ${SYSTEM})
  UNION ALL SELECT 'v ' || schemaname || '.' || viewname || ' ' || md5(definition) FROM pg_views WHERE schemaname NOT IN ${SYSTEM}
  UNION ALL SELECT 'p ' || schemaname || '.' || tablename || ' ' || policyname || ' ' || coalesce(qual, '') FROM pg_policies
  UNION ALL SELECT 'l ' || oid::regclass::text FROM pg_class WHERE relrowsecurity
  UNION ALL SELECT 'r ' || rolname || ' ' || rolsuper::text || ' ' || rolcanlogin::text FROM pg_roles
  UNION ALL SELECT 'g ' || grantee || ' ' || table_schema || '.' || table_name || ' ' || privilege_type
    FROM information_schema.role_table_grants WHERE table_schema NOT IN ${SYSTEM}
  UNION ALL SELECT 'n ' || nspname FROM pg_namespace
  UNION ALL SELECT 'e ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL SELECT 's ' || setdatabase::text || ' ' || setrole::text || ' ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
  UNION ALL SELECT 'q ' || schemaname || '.' || sequencename || ' ' || increment_by::text FROM pg_sequences
) s`;

const quoted = (schema: string, name: string) =>
  `"${schema.replace(/"/g, '""')}"."${name.replace(/"/g, '""')}"`;

async function fingerprintOf(db: Database): Promise<string> {
  const { rows } = await db.query<{ f: string }>('test-pool-fingerprint', FINGERPRINT);
  return rows[0]?.f ?? '';
}

async function describePristine(db: Database): Promise<Pristine> {
  const { rows } = await db.query<{ schemaname: string; tablename: string }>(
    'test-pool-tables',
    `SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN ${SYSTEM} ORDER BY 1, 2`,
  );
  const tables = rows.map((r) => quoted(r.schemaname, r.tablename));
  const seeds: Pristine['seeds'] = [];
  for (const table of tables) {
    const seeded = await db.query<{ rows: string | null }>(
      'test-pool-seed',
      `SELECT json_agg(t)::text AS rows FROM ${table} t`,
    );
    const json = seeded.rows[0]?.rows;
    if (json) seeds.push({ table, rows: json });
  }
  const seqs = await db.query<{ schemaname: string; sequencename: string; last_value: string | null }>(
    'test-pool-sequences',
    'SELECT schemaname, sequencename, last_value::text FROM pg_sequences',
  );
  return {
    fingerprint: await fingerprintOf(db),
    tables,
    seeds,
    sequences: seqs.rows.map((r) => ({ name: quoted(r.schemaname, r.sequencename), value: r.last_value })),
  };
}

/** Returns `db` to its template state; false when it cannot be (its schema changed). */
async function restore(db: Database, p: Pristine): Promise<boolean> {
  // DISCARD ALL less DEALLOCATE: the database layer keeps its prepared statements per SQL text, and
  // they stay valid, since the schema is the template's.
  await db.exec('RESET ALL; DISCARD TEMP; DISCARD SEQUENCES; UNLISTEN *; SELECT pg_advisory_unlock_all()');
  if ((await fingerprintOf(db)) !== p.fingerprint) return false;
  await db.transaction(async (tx) => {
    await tx.exec("SET LOCAL session_replication_role = 'replica'");
    await tx.exec(`TRUNCATE ${p.tables.join(', ')} RESTART IDENTITY`);
    for (const seed of p.seeds)
      await tx.query(
        'test-pool-reseed',
        `INSERT INTO ${seed.table} OVERRIDING SYSTEM VALUE SELECT * FROM json_populate_recordset(NULL::${seed.table}, $1::json)`,
        [seed.rows],
      );
    for (const s of p.sequences)
      await tx.query(
        'test-pool-sequence',
        s.value === null
          ? `SELECT setval('${s.name}', 1, false)`
          : `SELECT setval('${s.name}', $1::bigint, true)`,
        s.value === null ? [] : [s.value],
      );
  });
  return true;
}

async function leasePglite(): Promise<TestDatabase> {
  const raw = idle.pop() ?? (await openPglite(undefined, await pgliteTemplate(true)));
  pristine ??= describePristine(raw);
  const state = await pristine;
  let live = true;
  let released: Promise<void> | undefined;
  // A reused database must not call the handlers of an earlier suite.
  const subscriptions = new Set<Subscription>();
  const guard = (name: string) => {
    if (!live) throw new DatabaseUnavailable(name, undefined, new Error('PGlite is closed'));
  };
  // Closing the handle (as the app does when it stops, or a test simulating an outage) ends the lease:
  // the handle answers as a closed database from then on, and the database goes back to the pool.
  const release = () => {
    live = false;
    released ??= (async () => {
      for (const sub of subscriptions) await sub.close();
      const reusable = idle.length < MAX_IDLE && (await restore(raw, state).catch(() => false));
      if (reusable) {
        idle.push(raw);
        closeIdleSoon();
      } else await raw.close();
    })();
    return released;
  };
  const db: Database = {
    kind: 'pglite',
    async query(name, sql, params) {
      guard(name);
      return raw.query(name, sql, params);
    },
    async exec(sql) {
      guard('exec');
      return raw.exec(sql);
    },
    async transaction(fn) {
      guard('transaction');
      return raw.transaction(fn);
    },
    async ping() {
      guard('ping');
      return raw.ping();
    },
    async listen(channel, handler) {
      guard('listen');
      const sub = await raw.listen(channel, handler);
      subscriptions.add(sub);
      return sub;
    },
    close: release,
  };
  return { db, url: undefined, drop: release };
}
