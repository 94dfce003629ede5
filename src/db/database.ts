/**
 * One query interface over PostgreSQL (`pg`) and embedded PGlite. Queries carry a name so that logs and
 * errors say what ran; PostgreSQL errors are translated here (unique violations become `UniqueViolation`)
 * so domain code never inspects SQLSTATEs.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { citext } from '@electric-sql/pglite/contrib/citext';
import { pgcrypto } from '@electric-sql/pglite/contrib/pgcrypto';
import pg from 'pg';

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface Queryable {
  /** Runs one parameterised statement. `name` labels it in logs and errors. */
  query<T = Record<string, unknown>>(
    name: string,
    sql: string,
    params?: readonly unknown[],
  ): Promise<QueryResult<T>>;
  /** Runs several statements separated by semicolons (migrations); no parameters. */
  exec(sql: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A row that would break a unique constraint; `constraint` names it. */
export class UniqueViolation extends Error {
  constructor(
    readonly constraint: string,
    readonly queryName: string,
    cause: unknown,
  ) {
    super(`unique violation of ${constraint} in ${queryName}`, { cause });
    this.name = 'UniqueViolation';
  }
}

/** Any other database failure, labelled with the query that failed. */
export class DatabaseError extends Error {
  constructor(
    readonly queryName: string,
    readonly sqlState: string | undefined,
    cause: unknown,
  ) {
    super(
      `query ${queryName} failed${sqlState ? ` (${sqlState})` : ''}: ${(cause as Error)?.message ?? cause}`,
      { cause },
    );
    this.name = 'DatabaseError';
  }
}

function translate(name: string, err: unknown): Error {
  const e = err as { code?: string; constraint?: string };
  if (e?.code === '23505') return new UniqueViolation(e.constraint ?? 'unknown', name, err);
  return new DatabaseError(name, e?.code, err);
}

type RawQuery = (
  sql: string,
  params?: readonly unknown[],
) => Promise<{ rows: unknown[]; rowCount?: number | null; affectedRows?: number }>;

function wrap(raw: RawQuery, exec: (sql: string) => Promise<unknown>): Queryable {
  return {
    async exec(sql: string) {
      try {
        await exec(sql);
      } catch (err) {
        throw translate('exec', err);
      }
    },
    async query<T>(name: string, sql: string, params: readonly unknown[] = []) {
      try {
        const r = await raw(sql, params);
        return { rows: r.rows as T[], rowCount: r.rowCount ?? r.affectedRows ?? r.rows.length };
      } catch (err) {
        throw translate(name, err);
      }
    },
  };
}

// pg returns timestamptz as Date and int8 as string by default; keep bigint counts as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export function openPostgres(url: string, poolSize = 10): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client that loses its connection must not crash the process.
  pool.on('error', () => {});
  const q = wrap(
    (sql, params) => pool.query(sql, params as unknown[]),
    (sql) => pool.query(sql),
  );
  return {
    kind: 'postgres',
    query: q.query,
    exec: q.exec,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(
          wrap(
            (sql, params) => client.query(sql, params as unknown[]),
            (sql) => client.query(sql),
          ),
        );
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async ping() {
      await pool.query('select 1');
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}

/** The embedded database's folder is used by another live process (or already open in this one). */
export class DatabaseInUse extends Error {
  constructor(dir: string, holder: string) {
    super(
      `the embedded database in ${dir} is in use by ${holder}; run one instance per DATA_DIR, or set DATABASE_URL to share a PostgreSQL`,
    );
    this.name = 'DatabaseInUse';
  }
}

const heldLocks = new Set<string>();

/**
 * PGlite is PostgreSQL in one process: two processes on one data folder would corrupt it, and PGlite
 * does not stop the second. `<dir>.lock` holds the owner's pid and host; a lock whose process is gone
 * (a crash), or that names this very pid (a restarted container reuses pids) or another host (a new
 * container on the same volume), is stale and taken over.
 */
function lockDataDir(dir: string): () => void {
  const file = `${path.resolve(dir)}.lock`;
  if (heldLocks.has(file)) throw new DatabaseInUse(dir, 'this process');
  const mine = `${process.pid}@${hostname()}`;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, mine, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const holder = readFileSync(file, 'utf8').trim();
      const [pid, host] = holder.split('@');
      if (host === hostname() && Number(pid) !== process.pid && isAlive(Number(pid))) {
        throw new DatabaseInUse(dir, `process ${pid}`);
      }
      rmSync(file, { force: true });
    }
  }
  heldLocks.add(file);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    heldLocks.delete(file);
    rmSync(file, { force: true });
  };
}

function isAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Embedded PostgreSQL in `dir` (or in memory when `dir` is undefined), locked against a second process.
 * `loadDataDir` starts from a dump made by `dump()` (tests use it to skip initdb).
 */
export async function openPglite(
  dir: string | undefined,
  loadDataDir?: Blob,
): Promise<Database & { dump(): Promise<Blob> }> {
  let unlock = () => {};
  if (dir) {
    mkdirSync(dir, { recursive: true });
    unlock = lockDataDir(dir);
  }
  let db: PGlite;
  try {
    db = await PGlite.create(dir, { extensions: { citext, pgcrypto }, loadDataDir });
  } catch (err) {
    unlock();
    throw err;
  }
  const q = wrap(
    (sql, params) => db.query(sql, params as unknown[]),
    (sql) => db.exec(sql),
  );
  return {
    kind: 'pglite',
    query: q.query,
    exec: q.exec,
    transaction(fn) {
      // PGlite has one connection: inside `fn`, use `tx` only (the outer handle would wait for this transaction).
      return db.transaction((tx) =>
        fn(
          wrap(
            (sql, params) => tx.query(sql, params as unknown[]),
            (sql) => tx.exec(sql),
          ),
        ),
      );
    },
    async ping() {
      await db.query('select 1');
    },
    async close() {
      try {
        if (!db.closed) await db.close();
      } finally {
        unlock();
      }
    },
    dump: () => db.dumpDataDir('none'),
  };
}
