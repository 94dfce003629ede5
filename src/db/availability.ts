/**
 * Watches whether the database answers, to log an outage once when it begins and once when it ends
 * (see outage.ts). The watched Database behaves exactly as the one it wraps; every statement's outcome
 * moves the state: a DatabaseUnavailable error marks the database down, any success marks it up. The
 * pool needs no help to recover: it drops failed connections and opens new ones on demand.
 */
import type { FastifyBaseLogger } from 'fastify';
import { Outage } from '../outage.ts';
import { type Database, DatabaseUnavailable, type Queryable } from './database.ts';

export interface WatchedDatabase extends Database {
  /** True from the first failure for unavailability until the next statement that succeeds. */
  readonly unavailable: boolean;
}

/**
 * The error's own words, without the wrapping (never a connection string: pg does not put it there).
 * Its code (a SQLSTATE or a socket error such as ECONNREFUSED) goes out as `errorCode`: the log
 * redaction blanks any field named `code`, since OAuth codes are secrets.
 */
function reason(err: DatabaseUnavailable): { errorCode?: string; message: string } {
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  const errorCode = typeof cause?.code === 'string' ? cause.code : err.sqlState;
  const message = typeof cause?.message === 'string' ? cause.message : err.message;
  return errorCode === undefined ? { message } : { errorCode, message };
}

export function watchAvailability(db: Database, log: FastifyBaseLogger): WatchedDatabase {
  const outage = new Outage(
    log,
    'database',
    'requests that need it answer 503 DATABASE_UNAVAILABLE until it is back',
  );
  async function observe<T>(what: () => Promise<T>): Promise<T> {
    try {
      const result = await what();
      outage.succeeded({ database: db.kind });
      return result;
    } catch (err) {
      if (err instanceof DatabaseUnavailable)
        outage.failed({ database: db.kind, query: err.queryName, reason: reason(err) });
      throw err;
    }
  }

  const watched: WatchedDatabase = {
    kind: db.kind,
    get unavailable() {
      return outage.down;
    },
    query: (name, sql, params) => observe(() => db.query(name, sql, params)),
    exec: (sql) => observe(() => db.exec(sql)),
    // The statements inside use the transaction's own handle; the outcome, BEGIN to COMMIT, is observed.
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) => observe(() => db.transaction(fn)),
    ping: () => observe(() => db.ping()),
    close: () => db.close(),
    listen: (channel, handler) => db.listen(channel, handler),
  };
  if (db.poolStats) watched.poolStats = db.poolStats.bind(db);
  return watched;
}
