/**
 * One query interface over PostgreSQL (`pg`) and embedded PGlite. Queries carry a name so that logs and
 * errors say what ran; PostgreSQL errors are translated here (unique violations become `UniqueViolation`,
 * a database that cannot answer becomes `DatabaseUnavailable`) so domain code never inspects SQLSTATEs.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { PGlite, parse as pgliteParse, protocol as pgliteProtocol } from '@electric-sql/pglite';
import { citext } from '@electric-sql/pglite/contrib/citext';
import { pgcrypto } from '@electric-sql/pglite/contrib/pgcrypto';
import { NodeFS } from '@electric-sql/pglite/nodefs';
import pg from 'pg';
import { DIR_MODE, FILE_MODE } from '../data-dir.ts';
import { isAlive } from '../process-owner.ts';

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
  /** Connections of a PostgreSQL pool (for metrics); undefined for PGlite, which has no pool. */
  poolStats?(): PoolStats;
  /**
   * Calls `handler` with the payload of every NOTIFY on `channel` (a plain identifier), from any
   * connection or instance, once the notifying transaction commits. PostgreSQL listens on a connection of
   * its own, outside the pool; when that connection is lost, `lost` settles and nothing more is heard
   * (listen again). PGlite is in process: its subscription is never lost.
   */
  listen(channel: string, handler: (payload: string) => void): Promise<Subscription>;
}

/** A LISTEN in force. */
export interface Subscription {
  /** Settles when the listening connection is lost, or the subscription closed. */
  readonly lost: Promise<void>;
  close(): Promise<void>;
}

const CHANNEL = /^[a-z_][a-z0-9_]*$/;

function checkedChannel(channel: string): string {
  if (!CHANNEL.test(channel)) throw new Error(`not a channel name: ${channel}`);
  return channel;
}

export interface PoolStats {
  /** Connections open, busy or idle. */
  total: number;
  idle: number;
  /** Queries waiting for a connection. */
  waiting: number;
  /** DATABASE_POOL_SIZE. */
  max: number;
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

/** Callbacks waiting for the commit of a transaction, by its handle. */
const commitHooks = new WeakMap<Queryable, (() => void)[]>();

/**
 * Runs `fn` once the transaction of `q` has committed, and never if it rolls back; at once when `q` is not
 * a transaction (its statements commit as they run). Work that another connection must see (the email
 * outbox waking its sender) waits for this. `fn` must not throw (a throw is swallowed).
 */
export function afterCommit(q: Queryable, fn: () => void): void {
  const hooks = commitHooks.get(q);
  if (hooks) hooks.push(fn);
  else fn();
}

/** Makes `tx` a transaction handle whose `afterCommit` callbacks collect in `hooks`. */
function withCommitHooks(tx: Queryable, hooks: (() => void)[]): Queryable {
  commitHooks.set(tx, hooks);
  return tx;
}

function runCommitHooks(hooks: (() => void)[]): void {
  for (const fn of hooks.splice(0)) {
    try {
      fn();
    } catch {
      // A hook's failure is its own affair: the transaction is committed.
    }
  }
}

/**
 * A row that refers to one that is not there (23503), such as a row of an account that a concurrent
 * request deleted: `ofAccount` when the reference is an account's or its user's.
 */
export class ForeignKeyViolation extends DatabaseError {
  readonly ofAccount: boolean;
  constructor(
    readonly constraint: string,
    queryName: string,
    cause: unknown,
  ) {
    super(queryName, '23503', cause);
    this.name = 'ForeignKeyViolation';
    this.ofAccount = /_(account|user)_id_fkey$/.test(constraint);
  }
}

/**
 * The database cannot answer for now (refused or lost connection, no free connection in time, a server
 * shutting down, starting up, read-only or out of resources): the request may succeed later, so the API
 * answers 503 DATABASE_UNAVAILABLE with Retry-After instead of 500.
 */
export class DatabaseUnavailable extends DatabaseError {
  constructor(queryName: string, sqlState: string | undefined, cause: unknown) {
    super(queryName, sqlState, cause);
    this.name = 'DatabaseUnavailable';
  }
}

/** Socket errors of a connection that could not be made or was lost. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that cannot serve now but may soon: class 08 (connection exception), 53
 * (insufficient resources: disk full, out of memory, too many connections), 57P01-57P03 (shut down by an
 * administrator or a crash, cannot connect now: starting or recovering), 25006 (a write reached a
 * read-only server: a standby, or a primary during a failover).
 */
function unavailableState(state: string): boolean {
  return (
    state.startsWith('08') ||
    state.startsWith('53') ||
    state === '57P01' ||
    state === '57P02' ||
    state === '57P03' ||
    state === '25006'
  );
}

/**
 * No connection could be had for a statement: the pool was closed, none was free within the connect
 * timeout, or making one failed. pg and pg-pool raise these as plain Errors whose words are all that
 * differs; what tells them here is where they come from (acquiring a connection) and that the server
 * sent no error of its own (which would carry a SQLSTATE, judged by that instead).
 */
class NoConnection extends Error {
  constructor(cause: unknown) {
    super(`no database connection could be had: ${(cause as Error)?.message ?? cause}`, { cause });
    this.name = 'NoConnection';
  }
}

/**
 * The connection a statement ran on was lost under it: the client reported an `error` or `end` while the
 * statement was out, and the failure is not an error the server sent.
 */
class ConnectionLost extends Error {
  constructor(cause: unknown) {
    super(`the database connection was lost: ${(cause as Error)?.message ?? cause}`, { cause });
    this.name = 'ConnectionLost';
  }
}

/** An error the server sent (an ErrorResponse, with its SQLSTATE), as opposed to one of the client's. */
function fromServer(err: unknown): boolean {
  return err instanceof pg.DatabaseError;
}

/** The connection of the pool's next free client; a failure that is not the server's is NoConnection. */
async function acquire(pool: pg.Pool): Promise<pg.PoolClient> {
  try {
    return await pool.connect();
  } catch (err) {
    throw fromServer(err) ? err : new NoConnection(err);
  }
}

/**
 * Watches a checked-out client while it is used: `lost` is the first `error` or `end` it reported, and
 * `failed` turns a failure of a statement that ran meanwhile into ConnectionLost (unless the server
 * sent it). pg errors every pending statement before the client reports the loss, and both reach the
 * caller before its `await` resumes.
 */
function watch(client: pg.ClientBase) {
  const state: { lost: unknown; failed(err: unknown): unknown; stop(): void } = {
    lost: undefined,
    failed: (err) => (state.lost !== undefined && !fromServer(err) ? new ConnectionLost(err) : err),
    stop() {
      client.removeListener('error', onError);
      client.removeListener('end', onEnd);
    },
  };
  const onError = (err: unknown) => {
    state.lost ??= err;
  };
  const onEnd = () => {
    state.lost ??= new Error('the connection ended');
  };
  client.on('error', onError);
  client.on('end', onEnd);
  return state;
}

/**
 * A statement that reached PGlite after it was closed (a request still running while the service
 * stops). Told by PGlite's state (`closed`), not by its message.
 */
class PgliteClosed extends Error {
  constructor(cause?: unknown) {
    super('PGlite is closed', { cause });
    this.name = 'PgliteClosed';
  }
}

/** Whether `err` says the database cannot answer for now (rather than that the statement is wrong). */
export function isUnavailableError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  if (!e) return false;
  if (err instanceof PgliteClosed) return true;
  if (err instanceof NoConnection || err instanceof ConnectionLost) return true;
  return typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || unavailableState(e.code));
}

function translate(name: string, err: unknown): Error {
  if (err instanceof UniqueViolation || err instanceof DatabaseError) return err;
  const e = err as { code?: string; constraint?: string };
  if (e?.code === '23505') return new UniqueViolation(e.constraint ?? 'unknown', name, err);
  if (e?.code === '23503') return new ForeignKeyViolation(e.constraint ?? 'unknown', name, err);
  if (err instanceof NoConnection || err instanceof ConnectionLost)
    return new DatabaseUnavailable(name, (err.cause as { code?: string } | undefined)?.code, err);
  if (isUnavailableError(err)) return new DatabaseUnavailable(name, e?.code, err);
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

export interface PostgresOptions {
  /**
   * How long a query waits for a connection (a free one from the pool, or a new one being made) before
   * it fails as DatabaseUnavailable. Default 5 s.
   */
  connectTimeoutMs?: number;
}

/**
 * PostgreSQL aborts one of two transactions that wait on each other (40P01, deadlock) and, under
 * SERIALIZABLE, one that would break serial order (40001). Both are rolled back entirely and meant to be
 * run again, so a statement or transaction that fails so is retried (up to three runs in all, after a
 * short random pause) rather than answered 500. The statements are ordered to avoid deadlocks (see
 * sessions-store.ts); this covers the orders that remain, such as a ticket being used while its
 * account is deleted.
 */
const RETRYABLE = new Set(['40P01', '40001']);
const RUNS = 3;

async function retryingConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const state = err instanceof DatabaseError ? err.sqlState : undefined;
      if (attempt >= RUNS || state === undefined || !RETRYABLE.has(state)) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * attempt));
    }
  }
}

export function openPostgres(url: string, poolSize = 10, opts: PostgresOptions = {}): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    // Without a limit, a blackholed database host makes requests (and /health/ready) wait forever.
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    // Lets the kernel notice a peer that vanished without closing the connection (a host gone away).
    keepAlive: true,
    application_name: 'gatehouse',
  });
  // An idle client that loses its connection must not crash the process.
  pool.on('error', () => {});
  // Nor a checked-out one: pg-pool takes its own listener off a client while it is out, and `watch`
  // (below) covers the statements we run on it, but an 'error' event with no listener at all is an
  // uncaught exception that ends the process. Backends terminated under load (57P01) hit such a moment
  // once in test/reliability/database-faults; this listener closes every such window. The failure still
  // reaches the statement in flight, and the client is discarded when it is released.
  pool.on('connect', (client) => client.on('error', () => {}));
  // pool.query, with the connection watched: a lost one is told by the client's events, not by words.
  const onClient = async <R>(run: (client: pg.PoolClient) => Promise<R>): Promise<R> => {
    const client = await acquire(pool);
    const watched = watch(client);
    let failure: unknown;
    try {
      return await run(client);
    } catch (err) {
      failure = err;
      throw watched.failed(err);
    } finally {
      watched.stop();
      // As pool.query does: a client whose statement failed is not reused.
      client.release(failure === undefined ? undefined : (failure as Error));
    }
  };
  const q = wrap(
    (sql, params) => onClient((client) => client.query(sql, params as unknown[])),
    (sql) => onClient((client) => client.query(sql)),
  );
  return {
    kind: 'postgres',
    query: (name, sql, params) => retryingConflicts(() => q.query(name, sql, params)),
    exec: (sql) => retryingConflicts(() => q.exec(sql)),
    transaction: (fn) => retryingConflicts(() => runTransaction(fn)),
    async ping() {
      await q.query('ping', 'select 1');
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
    poolStats: () => ({
      total: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
      max: poolSize,
    }),
    listen: (channel, handler) => listenPostgres(url, checkedChannel(channel), handler, opts),
  };

  async function runTransaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await acquire(pool);
    } catch (err) {
      throw translate('connect', err);
    }
    // A checked-out client has no error listener of the pool's: a connection lost between two
    // statements (while the transaction awaits something else) would be an unhandled 'error' event
    // and end the process. The next statement fails instead, and the client is discarded below.
    const watched = watch(client);
    const hooks: (() => void)[] = [];
    const tx = withCommitHooks(
      wrap(
        (sql, params) =>
          client.query(sql, params as unknown[]).catch((err: unknown) => {
            throw watched.failed(err);
          }),
        (sql) =>
          client.query(sql).catch((err: unknown) => {
            throw watched.failed(err);
          }),
      ),
      hooks,
    );
    let lost: unknown;
    try {
      await tx.query('begin', 'BEGIN');
      const result = await fn(tx);
      // A COMMIT that fails for a lost connection leaves the outcome unknown to us: the caller gets
      // DatabaseUnavailable (503), never a success for a write that may not have happened.
      await tx.query('commit', 'COMMIT');
      runCommitHooks(hooks);
      return result;
    } catch (err) {
      lost = watched.lost;
      if (lost === undefined) {
        // A client left inside a failed transaction must not go back to the pool.
        await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
          lost = rollbackErr;
        });
      }
      throw err;
    } finally {
      lost ??= watched.lost;
      watched.stop();
      // A client whose connection failed is destroyed, not returned to the pool.
      client.release(lost === undefined ? undefined : (lost as Error));
    }
  }
}

/**
 * A LISTEN on a connection of its own: a pooled connection would be handed to other statements, and
 * LISTEN belongs to the connection. Lost when the connection errs or ends (a restarted server, a
 * network cut): the caller listens again, and must assume it missed notifications meanwhile.
 */
async function listenPostgres(
  url: string,
  channel: string,
  handler: (payload: string) => void,
  opts: PostgresOptions,
): Promise<Subscription> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    keepAlive: true,
    application_name: 'gatehouse-listen',
  });
  let markLost = () => {};
  const lost = new Promise<void>((resolve) => {
    markLost = resolve;
  });
  client.on('error', () => markLost());
  client.on('end', () => markLost());
  client.on('notification', (m) => {
    if (m.channel === channel) handler(m.payload ?? '');
  });
  try {
    try {
      await client.connect();
    } catch (err) {
      throw fromServer(err) ? err : new NoConnection(err);
    }
    const watched = watch(client);
    try {
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      throw watched.failed(err);
    } finally {
      watched.stop();
    }
  } catch (err) {
    markLost();
    await client.end().catch(() => {});
    throw translate('listen', err);
  }
  return {
    lost,
    async close() {
      markLost();
      await client.end().catch(() => {});
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
      writeFileSync(file, mine, { flag: 'wx', mode: FILE_MODE });
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

/** Runs async functions one at a time, in call order. */
class Lock {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => {});
    return result;
  }
}

/** Distinct statements kept prepared per embedded database; others run unprepared. */
const MAX_PREPARED = 500;

function joinMessages(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Statement execution for PGlite with one trip into the WebAssembly module per query. `PGlite.query`
 * makes six (parse, describe, bind, describe, execute, sync), each with its own message encoding and
 * decoding on the main thread, which made the per-query overhead larger than most of our queries. Here
 * each distinct SQL text is parsed once as a named prepared statement (its parameter types remembered
 * for PGlite's serializers) and then run as bind + describe + execute + sync in one message. The
 * results go through PGlite's own parsers, so rows look exactly as `PGlite.query` returns them.
 * Callers serialise calls (one PGlite connection).
 */
function preparedRunner(db: PGlite): RawQuery {
  const { serialize } = pgliteProtocol;
  const prepared = new Map<string, { name: string; types: number[] }>();
  let counter = 0;

  async function prepare(sql: string): Promise<{ name: string; types: number[] }> {
    const name = `gatehouse_${++counter}`;
    const { messages } = await db.execProtocol(
      joinMessages([
        serialize.parse({ name, text: sql }),
        serialize.describe({ type: 'S', name }),
        serialize.sync(),
      ]),
      { syncToFs: false },
    );
    const statement = { name, types: pgliteParse.parseDescribeStatementResults(messages) };
    prepared.set(sql, statement);
    return statement;
  }

  async function execute(statement: { name: string; types: number[] }, params: readonly unknown[]) {
    const values = params.map((v, i) => {
      if (v === null || v === undefined) return null;
      const serializer = db.serializers[statement.types[i] as number];
      return serializer ? serializer(v) : String(v);
    });
    const { messages } = await db.execProtocol(
      joinMessages([
        serialize.bind({ statement: statement.name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs: false },
    );
    const [result] = pgliteParse.parseResults(messages, db.parsers);
    return { rows: result?.rows ?? [], rowCount: result?.rowCount, affectedRows: result?.affectedRows };
  }

  return (sql, params = []) =>
    db.runExclusive(async () => {
      // PGlite's own query() says so; the protocol calls below would fail on its released module.
      if (db.closed) throw new PgliteClosed();
      let statement = prepared.get(sql);
      if (!statement && prepared.size >= MAX_PREPARED) {
        const r = await db.query(sql, params as unknown[]);
        return { rows: r.rows, rowCount: r.rowCount, affectedRows: r.affectedRows };
      }
      statement ??= await prepare(sql);
      const inTransaction = db.isInTransaction();
      let result: Awaited<ReturnType<typeof execute>>;
      try {
        result = await execute(statement, params);
      } catch (err) {
        // A table under the statement changed its row type since it was prepared (ALTER TABLE): forget
        // the statement and, outside a transaction (which the error has aborted), prepare it again.
        if ((err as { code?: string }).code !== '0A000') throw err;
        prepared.delete(sql);
        await db
          .execProtocol(
            joinMessages([serialize.close({ type: 'S', name: statement.name }), serialize.sync()]),
            {
              syncToFs: false,
            },
          )
          .catch(() => {});
        if (inTransaction) throw err;
        result = await execute(await prepare(sql), params);
      }
      if (!inTransaction) await db.syncToFs();
      return result;
    });
}

type EmscriptenFS = { doChmod?: (stream: unknown, node: unknown, mode: number, dontFollow: boolean) => void };
type PgliteFsInit = Awaited<ReturnType<NodeFS['init']>>;

/**
 * PGlite's NodeFS, except that the files it creates are its owner's only. Emscripten's file system
 * chmods every file it creates to the mode asked for (0666), so the process umask does not reach
 * PGlite's files; every chmod it makes is masked to the owner's bits here, before PostgreSQL starts.
 */
class OwnerOnlyNodeFS extends NodeFS {
  override async init(pg: PGlite, opts: Parameters<NodeFS['init']>[1]): Promise<PgliteFsInit> {
    const base = await super.init(pg, opts);
    const ownerOnly = (mod: { FS: EmscriptenFS }) => {
      const doChmod = mod.FS.doChmod;
      if (typeof doChmod !== 'function') return; // another Emscripten: DATA_DIR's start-up check remains
      mod.FS.doChmod = (stream, node, mode, dontFollow) =>
        doChmod.call(mod.FS, stream, node, mode & ~0o077, dontFollow);
    };
    const preRun = [...(base.emscriptenOpts.preRun ?? []), ownerOnly];
    return { ...base, emscriptenOpts: { ...base.emscriptenOpts, preRun } };
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
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    unlock = lockDataDir(dir);
  }
  let db: PGlite;
  try {
    db = await PGlite.create({
      ...(dir ? { fs: new OwnerOnlyNodeFS(dir) } : {}),
      extensions: { citext, pgcrypto },
      loadDataDir,
    });
  } catch (err) {
    unlock();
    throw err;
  }
  // One connection: a statement outside a transaction waits for the transaction in progress, as in
  // PGlite's own query(); statements of a transaction run inside it.
  const lock = new Lock();
  const run = preparedRunner(db);
  // close() takes the lock too, so a statement that fails with the database closed failed because of it.
  const closedAware = async <T>(what: () => Promise<T>): Promise<T> => {
    try {
      return await lock.run(what);
    } catch (err) {
      throw db.closed && !(err instanceof PgliteClosed) ? new PgliteClosed(err) : err;
    }
  };
  const q = wrap(
    (sql, params) => closedAware(() => run(sql, params)),
    (sql) => closedAware(() => db.exec(sql)),
  );
  return {
    kind: 'pglite',
    query: q.query,
    exec: q.exec,
    async transaction(fn) {
      // PGlite has one connection: inside `fn`, use `tx` only (the outer handle would wait for this transaction).
      const hooks: (() => void)[] = [];
      let result: Awaited<ReturnType<typeof fn>>;
      try {
        result = await lock.run(() =>
          db.transaction((tx) =>
            fn(
              withCommitHooks(
                wrap(run, (sql) => tx.exec(sql)),
                hooks,
              ),
            ),
          ),
        );
      } catch (err) {
        // BEGIN or COMMIT on a closed database (close() waits for the lock, so nothing else closed it
        // midway); errors of `fn` (and its statements) pass unchanged.
        if (!(err instanceof DatabaseError) && db.closed) {
          throw new DatabaseUnavailable('transaction', undefined, err);
        }
        throw err;
      }
      runCommitHooks(hooks);
      return result;
    },
    async ping() {
      await q.query('ping', 'select 1');
    },
    async close() {
      try {
        if (!db.closed) await lock.run(() => db.close());
      } finally {
        unlock();
      }
    },
    dump: () => lock.run(() => db.dumpDataDir('none')),
    async listen(channel, handler) {
      const unlisten = await lock.run(() => db.listen(checkedChannel(channel), handler));
      let closed = () => {};
      const lost = new Promise<void>((resolve) => {
        closed = resolve;
      });
      return {
        lost,
        async close() {
          closed();
          if (!db.closed) await lock.run(() => unlisten()).catch(() => {});
        },
      };
    },
  };
}
