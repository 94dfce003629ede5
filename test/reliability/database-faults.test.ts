/**
 * Database faults answer 503 DATABASE_UNAVAILABLE with Retry-After, never 500: a refused connection, a
 * connection cut mid-load (by a TCP proxy in this process, so the shared PostgreSQL is never restarted),
 * a connection the server terminates (57P01), no free connection within the connect timeout, a
 * read-only server (25006). The outage is logged once when it begins and once when it ends, the pool
 * recovers by itself, /health/ready reports it, and every write that got a 2xx is there afterwards.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DatabaseError,
  DatabaseUnavailable,
  isUnavailableError,
  openPglite,
  openPostgres,
} from '../../src/db/database.ts';
import { HS, newEmail } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';
import { captureLog } from '../helpers/log.ts';
import { startTcpProxy, type TcpProxy, targetOf } from '../helpers/tcp-proxy.ts';
import { type Outcome, runLoad, summarise } from './load.ts';

const OUTAGE = /^database unavailable/;
const RECOVERED = /^database available again/;

describe('what counts as the database being unavailable', () => {
  it('classifies lost and refused connections, shutdowns, read-only and resource errors; not SQL mistakes', () => {
    const unavailable = [
      { code: 'ECONNREFUSED' },
      { code: 'ECONNRESET' },
      { code: 'ETIMEDOUT' },
      { code: '57P01', message: 'terminating connection due to administrator command' },
      { code: '57P03', message: 'the database system is starting up' },
      { code: '25006', message: 'cannot execute INSERT in a read-only transaction' },
      { code: '08006' },
      { code: '53300', message: 'too many connections' },
    ];
    for (const e of unavailable) assert.equal(isUnavailableError(e), true, JSON.stringify(e));
    const mistakes = [
      { code: '42P01', message: 'relation "nope" does not exist' },
      { code: '23503' },
      { code: '22P02' },
      new Error('something else'),
      // Words alone say nothing: a closed PGlite is told by its state, a lost or unobtainable PostgreSQL
      // connection by where the failure came from and the client's events (below).
      new Error('PGlite is closed'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new Error('Client has encountered a connection error and is not queryable'),
      undefined,
    ];
    for (const e of mistakes) assert.equal(isUnavailableError(e), false, JSON.stringify(e));
  });

  it('answers a statement or a transaction that reaches PGlite after it closed as unavailable', async () => {
    const db = await openPglite(undefined);
    await db.query('warm', 'select 1');
    await db.close();
    await assert.rejects(db.query('after-close', 'select 1'), DatabaseUnavailable);
    await assert.rejects(db.exec('select 1'), DatabaseUnavailable);
    await assert.rejects(
      db.transaction((tx) => tx.query('in-tx', 'select 1')),
      DatabaseUnavailable,
    );
  });
});

const postgres = dbKinds().includes('postgres');

/** Messages pg and pg-pool give lost or unobtainable connections, which an error of the server may also say. */
const CONNECTION_WORDS = [
  'Connection terminated unexpectedly',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

for (const kind of dbKinds()) {
  describe(`an error is classified by what it is, not by its words [${kind}]`, () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(kind);
    });
    after(() => database.drop());

    it('keeps an error the server raised a DatabaseError, even when it reads like a lost connection', async () => {
      for (const words of CONNECTION_WORDS) {
        const sql = `DO $$ BEGIN RAISE EXCEPTION '${words}'; END $$`;
        for (const run of [
          () => database.db.query('raise', sql),
          () => database.db.exec(sql),
          () => database.db.transaction((tx) => tx.query('raise-in-tx', sql)),
        ]) {
          const err = await run().then(
            () => assert.fail('the statement succeeded'),
            (e: unknown) => e,
          );
          assert.ok(err instanceof DatabaseError, String(err));
          assert.ok(!(err instanceof DatabaseUnavailable), `${words}: classified as unavailable`);
          assert.equal(err.sqlState, 'P0001');
        }
      }
    });

    it('keeps a statement the client cannot send a DatabaseError', async () => {
      const circular: Record<string, unknown> = {};
      circular['self'] = circular;
      const err = await database.db.query('bad-param', 'select $1::jsonb', [circular]).then(
        () => assert.fail('the statement succeeded'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof DatabaseError && !(err instanceof DatabaseUnavailable), String(err));
    });
  });
}

describe('a lost or unobtainable PostgreSQL connection is unavailable by where it failed', {
  skip: !postgres,
}, () => {
  it('answers a statement on a closed pool as unavailable', async () => {
    const database = await createTestDatabase('postgres');
    await database.db.query('warm', 'select 1');
    await database.db.close();
    await assert.rejects(database.db.query('after-close', 'select 1'), DatabaseUnavailable);
    await assert.rejects(
      database.db.transaction((tx) => tx.query('in-tx', 'select 1')),
      DatabaseUnavailable,
    );
    await database.drop();
  });

  it('answers a statement whose connection the server ends under it as unavailable', async () => {
    const database = await createTestDatabase('postgres');
    const other = openPostgres(database.url as string, 1);
    try {
      // pg_terminate_backend ends the connection without a word to the client in some timings; either
      // way the statement is lost with its connection.
      const running = database.db.transaction(async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('pid', 'select pg_backend_pid() as pid');
        await other.query('terminate', 'select pg_terminate_backend($1)', [rows[0]?.pid]);
        await sleep(100);
        return tx.query('after', 'select 1');
      });
      await assert.rejects(running, DatabaseUnavailable);
      assert.equal((await database.db.query<{ n: number }>('again', 'select 1 as n')).rows[0]?.n, 1);
    } finally {
      await other.close();
      await database.drop();
    }
  });
});

if (postgres)
  describe('PostgreSQL behind a proxy that drops and refuses connections', () => {
    let direct: TestDatabase;
    let proxy: TcpProxy;
    let t: TestApp;
    const captured = captureLog('info');

    before(async () => {
      direct = await createTestDatabase('postgres');
      proxy = await startTcpProxy(targetOf(String(direct.url)));
      const proxied = openPostgres(proxy.url(String(direct.url)), 5, { connectTimeoutMs: 1_000 });
      t = await buildTestApp(
        'postgres',
        { ...HS, RATE_LIMIT_ENABLED: false, STORAGE_ENABLED: false, AUTO_ACTIVATE_NEW_USERS: true },
        {
          log: captured.log,
          database: { db: proxied, url: proxy.url(String(direct.url)), drop: () => proxied.close() },
        },
      );
    });
    after(async () => {
      await t?.close();
      await proxy?.close();
      await direct?.drop();
    });

    /** Waits until the service answers from the database again (the pool makes new connections). */
    async function recovered(): Promise<void> {
      for (let i = 0; i < 100; i++) {
        const r = await t.app.inject({ url: '/health/ready' });
        if (r.statusCode === 204) return;
        await sleep(50);
      }
      assert.fail('the service did not recover');
    }

    function outageLines() {
      return { down: captured.matching(OUTAGE).length, up: captured.matching(RECOVERED).length };
    }

    it('answers 503 DATABASE_UNAVAILABLE with Retry-After while the database refuses, reports it on /health/ready, and recovers without a restart', async () => {
      const before = outageLines();
      await proxy.refuse();
      proxy.dropAll();
      try {
        for (let i = 0; i < 5; i++) {
          const r = await t.app.inject({
            method: 'POST',
            url: '/auth/login',
            payload: { email: newEmail(), password: 'whatever password' },
          });
          assert.equal(r.statusCode, 503, r.body);
          assert.equal(r.json().code, 'DATABASE_UNAVAILABLE');
          assert.equal(r.headers['retry-after'], '5');
          assert.ok(r.json().requestId, 'a 5xx carries the request id');
          assert.doesNotMatch(r.body, /ECONNREFUSED|127\.0\.0\.1|postgres/i, 'no internals in the body');
        }
        const ready = await t.app.inject({ url: '/health/ready' });
        assert.equal(ready.statusCode, 503);
        assert.match(ready.json().message, /database/);
        assert.ok(ready.headers['retry-after']);
        assert.equal(
          (await t.app.inject({ url: '/health' })).statusCode,
          204,
          'liveness does not ask the database',
        );
      } finally {
        await proxy.accept();
      }
      await recovered();
      const r = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: newEmail(), password: 'correct horse battery', cookie: false },
      });
      assert.equal(r.statusCode, 200, r.body);
      const after = outageLines();
      assert.equal(after.down - before.down, 1, 'one line when the outage began, not one per request');
      assert.equal(after.up - before.up, 1, 'one line when it ended');
      const line = captured.matching(OUTAGE).at(-1) ?? {};
      assert.equal(line['level'], 50, 'the outage is an error');
      // The cause is readable: the redaction of fields named `code` once blanked its error code.
      assert.doesNotMatch(JSON.stringify(line['reason']), /redacted/);
      assert.doesNotMatch(JSON.stringify(line), /password/i);
    });

    it('answers 503 when no connection can be had within the connect timeout (a host that went silent)', async () => {
      proxy.mode = 'blackhole';
      proxy.dropAll();
      try {
        const started = Date.now();
        const r = await t.app.inject({
          method: 'POST',
          url: '/auth/login',
          payload: { email: newEmail(), password: 'whatever password' },
        });
        assert.equal(r.statusCode, 503, r.body);
        assert.equal(r.json().code, 'DATABASE_UNAVAILABLE');
        assert.ok(Date.now() - started < 10_000, 'the request did not hang');
        const ready = await t.app.inject({ url: '/health/ready' });
        assert.equal(ready.statusCode, 503);
      } finally {
        proxy.mode = 'forward';
        proxy.dropAll();
      }
      await recovered();
    });

    it('answers 503 while the server is read-only (25006), and writes again once it is not', async () => {
      const name = new URL(String(direct.url)).pathname.slice(1);
      await direct.db.exec(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      proxy.dropAll(); // new connections pick the setting up
      try {
        const r = await t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email: newEmail(), password: 'correct horse battery', cookie: false },
        });
        assert.equal(r.statusCode, 503, r.body);
        assert.equal(r.json().code, 'DATABASE_UNAVAILABLE');
      } finally {
        await direct.db.exec(`ALTER DATABASE ${name} RESET default_transaction_read_only`);
        proxy.dropAll();
      }
      const r = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: newEmail(), password: 'correct horse battery', cookie: false },
      });
      assert.equal(r.statusCode, 200, r.body);
    });

    it('fails a transaction whose connection is lost between two statements, without crashing, and leaves nothing of it', async () => {
      const db = t.ctx.db;
      await db.exec('CREATE TABLE IF NOT EXISTS public.fault_probe (k text PRIMARY KEY)');
      const err = await db
        .transaction(async (tx) => {
          await tx.query('probe-insert', 'INSERT INTO public.fault_probe VALUES ($1)', ['half']);
          proxy.dropAll();
          // The connection's 'error' event arrives while the transaction awaits something else.
          await sleep(100);
          await tx.query('probe-insert', 'INSERT INTO public.fault_probe VALUES ($1)', ['other half']);
        })
        .catch((e: unknown) => e);
      assert.ok(err instanceof DatabaseUnavailable, String(err));
      const { rows } = await direct.db.query('probe-read', 'SELECT k FROM public.fault_probe');
      assert.deepEqual(rows, []);
      // The pool hands out working connections again.
      await db.query('probe-read', 'SELECT 1');
    });

    it('keeps an ordinary SQL mistake a DatabaseError (a 500 is a bug there, not an outage)', async () => {
      const err = await t.ctx.db.query('typo', 'SELECT * FROM public.no_such_table').catch((e: unknown) => e);
      assert.ok(err instanceof DatabaseError);
      assert.ok(!(err instanceof DatabaseUnavailable));
    });

    it('under concurrent load with connections cut, terminated and refused: no 500, every refusal a 503 with Retry-After, every 2xx registration stored, one log line per outage', async () => {
      const before = outageLines();
      const registered: string[] = [];
      let faultsDone = false;
      let okAfterFaults = 0;
      const load = runLoad({
        workers: 6,
        maxMs: 60_000,
        // Until every fault is past and the service has answered 20 registrations since.
        done: () => faultsDone && okAfterFaults >= 20,
        async step(worker, i): Promise<Outcome[]> {
          const email = `load-${worker}-${i}-${newEmail()}`;
          const password = 'correct horse battery';
          const out: Outcome[] = [];
          const reg = await t.app.inject({
            method: 'POST',
            url: '/auth/register',
            payload: { email, password, cookie: false },
          });
          out.push({ route: 'register', res: reg });
          if (reg.statusCode !== 200) return out;
          registered.push(email);
          if (faultsDone) okAfterFaults += 1;
          const refresh = await t.app.inject({
            url: `/auth/token/refresh?refresh_token=${encodeURIComponent(reg.json().refresh_token)}`,
          });
          out.push({ route: 'refresh', res: refresh });
          const login = await t.app.inject({
            method: 'POST',
            url: '/auth/login',
            payload: { email, password, cookie: false },
          });
          out.push({ route: 'login', res: login });
          return out;
        },
      });
      // The faults one after another, each once the load has been answered since the previous one.
      const count = (status: number) => load.outcomes.filter((o) => o.res.statusCode === status).length;
      const answered = async (n: number, status = 200) => {
        const seen = count(status);
        for (let i = 0; i < 500 && count(status) < seen + n; i++) await sleep(20);
      };
      await answered(5);
      proxy.dropAll();
      await answered(3);
      await direct.db.query(
        'terminate',
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'gatehouse' AND pid <> pg_backend_pid()`,
      );
      await answered(3);
      await proxy.refuse();
      proxy.dropAll();
      await answered(2, 503); // refused until the refusals are seen
      await proxy.accept();
      await answered(3);
      proxy.mode = 'reset';
      proxy.dropAll();
      await answered(1, 503);
      proxy.mode = 'forward';
      faultsDone = true;
      const outcomes = await load.finished;
      const s = summarise(outcomes);

      assert.deepEqual(s.serverErrors, [], 'no 5xx other than 503');
      for (const o of outcomes.filter((x) => x.res.statusCode === 503)) {
        assert.equal(o.res.json().code, 'DATABASE_UNAVAILABLE', o.res.body);
        assert.equal(o.res.headers['retry-after'], '5');
      }
      for (const o of outcomes.filter((x) => x.res.statusCode >= 400 && x.res.statusCode !== 503)) {
        assert.ok(o.res.statusCode < 500, o.res.body);
      }
      assert.ok((s.byStatus[200] ?? 0) > 20, `work got done: ${JSON.stringify(s.byStatus)}`);
      assert.ok((s.byStatus[503] ?? 0) > 0, `the faults were felt: ${JSON.stringify(s.byStatus)}`);
      // Recovered without a restart: the last requests of every worker succeeded.
      await recovered();

      // Every registration answered 200 is stored (read past the proxy).
      const { rows } = await direct.db.query<{ email: string }>(
        'stored',
        'SELECT email::text AS email FROM auth.accounts WHERE email = ANY($1::text[])',
        [registered],
      );
      assert.equal(rows.length, registered.length, 'a 2xx registration was lost');

      const after = outageLines();
      const down = after.down - before.down;
      assert.ok(down >= 1, 'the outage was logged');
      // One cut can show as two outages: the first new connection succeeds ("available again") a few
      // milliseconds before a statement sent on another connection the cut killed, which the pool had
      // not yet noticed, fails. So at most two per fault, and far fewer than the failed statements.
      const failed = captured
        .matching(RECOVERED)
        .slice(before.up)
        .reduce((n, l) => n + Number(l['failures'] ?? 0), 0);
      assert.ok(down <= 8, `logged per outage (${down} lines for 4 faults), not per failed request`);
      assert.ok(down < failed, `${down} outage lines for ${failed} failed statements`);
      assert.ok((s.byStatus[503] ?? 0) >= down, 'fewer lines than refusals');
      assert.equal(after.up - before.up, down, 'each outage logged its end');
    });
  });

describe('the embedded database once closed (a request still running while the service stops)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, RATE_LIMIT_ENABLED: false, STORAGE_ENABLED: false });
  });
  after(() => t.close());

  it('answers 503 DATABASE_UNAVAILABLE, not 500', async () => {
    await t.database.db.close();
    const r = await t.app.inject({
      method: 'POST',
      url: '/auth/login',
      payload: { email: newEmail(), password: 'whatever password' },
    });
    assert.equal(r.statusCode, 503, r.body);
    assert.equal(r.json().code, 'DATABASE_UNAVAILABLE');
    assert.equal(r.headers['retry-after'], '5');
  });
});
