/**
 * The Database interface behaves the same on PGlite and PostgreSQL: transactions commit or roll back as
 * a whole, failures are translated and labelled with the query name; and the embedded database refuses
 * a second process on its folder.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseError, DatabaseInUse, openPglite, UniqueViolation } from '../../src/db/database.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds, migratedPgliteDump, type TestDatabase } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';

for (const kind of dbKinds()) {
  describe(`Database interface [${kind}]`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(kind);
      await t.db.exec('CREATE TABLE public.kv (k text PRIMARY KEY, v int NOT NULL)');
    });
    after(() => t.drop());

    it('commits a transaction whose function resolves', async () => {
      const out = await t.db.transaction(async (tx) => {
        await tx.query('test-insert', 'INSERT INTO public.kv VALUES ($1, $2)', ['a', 1]);
        await tx.query('test-insert', 'INSERT INTO public.kv VALUES ($1, $2)', ['b', 2]);
        return 'done';
      });
      assert.equal(out, 'done');
      const { rows } = await t.db.query<{ k: string }>('test-read', 'SELECT k FROM public.kv ORDER BY k');
      assert.deepEqual(
        rows.map((r) => r.k),
        ['a', 'b'],
      );
    });

    it('rolls back every statement of a transaction whose function throws', async () => {
      await assert.rejects(
        t.db.transaction(async (tx) => {
          await tx.query('test-insert', 'INSERT INTO public.kv VALUES ($1, $2)', ['c', 3]);
          await tx.query('test-update', 'UPDATE public.kv SET v = 100');
          throw new Error('halfway');
        }),
        /halfway/,
      );
      const { rows } = await t.db.query<{ k: string; v: number }>(
        'test-read',
        'SELECT k, v FROM public.kv ORDER BY k',
      );
      assert.deepEqual(rows, [
        { k: 'a', v: 1 },
        { k: 'b', v: 2 },
      ]);
    });

    it('turns a unique violation into UniqueViolation naming the constraint and the query', async () => {
      const err = await t.db
        .query('insert-duplicate', 'INSERT INTO public.kv VALUES ($1, $2)', ['a', 9])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.ok(err instanceof UniqueViolation);
      assert.equal(err.constraint, 'kv_pkey');
      assert.equal(err.queryName, 'insert-duplicate');
    });

    it('labels any other failure with the query name and SQLSTATE', async () => {
      const err = await t.db.query('read-missing', 'SELECT * FROM public.missing').then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof DatabaseError);
      assert.equal(err.queryName, 'read-missing');
      assert.equal(err.sqlState, '42P01');
      assert.match(err.message, /^query read-missing failed \(42P01\)/);
    });

    it('returns counts as numbers and reports rowCount for writes', async () => {
      const { rows } = await t.db.query<{ n: unknown }>('test-count', 'SELECT count(*) AS n FROM public.kv');
      assert.equal(rows[0]?.n, 2);
      const upd = await t.db.query('test-update', 'UPDATE public.kv SET v = v + 1');
      assert.equal(upd.rowCount, 2);
    });
  });
}

describe('embedded database folder lock', () => {
  const dataDir = tempDir('gatehouse-lock-');
  const dir = path.join(dataDir, 'db');
  const lock = `${dir}.lock`;
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('refuses a folder whose lock names another live process on this host', async () => {
    writeFileSync(lock, `${process.ppid}@${hostname()}`);
    await assert.rejects(openPglite(dir), (err: unknown) => {
      assert.ok(err instanceof DatabaseInUse);
      assert.match(
        err.message,
        new RegExp(`in use by process ${process.ppid}; run one instance per DATA_DIR`),
      );
      return true;
    });
  });

  it('takes over a stale lock left by a crashed process, refuses a second open here, and unlocks on close', async () => {
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(lock, `${gone}@${hostname()}`);
    const db = await openPglite(dir, await migratedPgliteDump());
    try {
      await assert.rejects(openPglite(dir), DatabaseInUse);
      assert.equal((await db.query('test-ping', 'SELECT 1 AS one')).rows[0]?.['one'], 1);
    } finally {
      await db.close();
    }
    assert.equal(existsSync(lock), false);
  });
});

if (runsHere('postgres', 'deadlock retries on PostgreSQL')) {
  describe('deadlocks on PostgreSQL', () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase('postgres');
      await t.db.exec(
        'CREATE TABLE pair (id int PRIMARY KEY, v int); INSERT INTO pair VALUES (1, 0), (2, 0)',
      );
    });
    after(() => t?.drop());

    it('runs again the transaction PostgreSQL aborts to break a deadlock, so both writers succeed', async () => {
      // Two transactions lock the two rows in opposite orders, each waiting for the other to hold its
      // first row: a deadlock every time. PostgreSQL aborts one (40P01); it must be run again, not fail.
      let held = 0;
      const bothHold = () =>
        new Promise<void>((resolve) => {
          held++;
          const check = () => (held >= 2 ? resolve() : setTimeout(check, 5));
          check();
        });
      const runs = { a: 0, b: 0 };
      const writer = (name: 'a' | 'b', first: number, second: number) =>
        t.db.transaction(async (tx) => {
          runs[name]++;
          await tx.query('test-first', 'UPDATE pair SET v = v + 1 WHERE id = $1', [first]);
          if (runs[name] === 1) await bothHold();
          await tx.query('test-second', 'UPDATE pair SET v = v + 1 WHERE id = $1', [second]);
        });
      await Promise.all([writer('a', 1, 2), writer('b', 2, 1)]);
      assert.equal(runs.a + runs.b, 3, 'one of the two ran twice');
      const { rows } = await t.db.query<{ v: number }>('test-pair', 'SELECT v FROM pair ORDER BY id');
      assert.deepEqual(
        rows.map((r) => r.v),
        [2, 2],
        'each writer applied its two updates once',
      );
    });
  });
}
