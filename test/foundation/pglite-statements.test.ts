/**
 * The embedded database runs each statement as a named prepared statement in one protocol message
 * (src/db/database.ts). Rows, counts, parameter types and errors must be exactly what PGlite's own
 * query() gives, and a statement must survive a schema change and a rolled-back transaction.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { type Database, DatabaseError, openPglite, UniqueViolation } from '../../src/db/database.ts';

describe('PGlite statements', () => {
  let db: Database;
  let plain: PGlite;
  before(async () => {
    db = await openPglite(undefined);
    plain = await PGlite.create();
    const ddl = `CREATE TABLE t (id int PRIMARY KEY, name text, tags text[], at timestamptz, doc jsonb, n int8, u uuid)`;
    await db.exec(ddl);
    await plain.exec(ddl);
  });
  after(async () => {
    await db.close();
    await plain.close();
  });

  it('returns the same rows and counts as PGlite.query, with the same parameter conversions', async () => {
    const statements: [string, unknown[]][] = [
      [
        'INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7), ($8, NULL, NULL, NULL, NULL, NULL, NULL)',
        [
          1,
          "it's",
          ['a', 'b,c', 'd"e', null],
          new Date('2026-01-02T03:04:05.678Z'),
          { x: [1, 'two'] },
          42,
          '5b0e1e5e-0c5f-4a67-9d5e-4a8e3d9f8a11',
          2,
        ],
      ],
      ['SELECT * FROM t ORDER BY id', []],
      ['SELECT id FROM t WHERE tags @> $1::text[] AND at < $2', [['b,c'], new Date('2030-01-01')]],
      ['UPDATE t SET name = $2 WHERE id >= $1', [1, 'renamed']],
      ['SELECT count(*) AS n, $1::boolean AS flag, $2::text AS missing FROM t', [true, null]],
      ['DELETE FROM t WHERE id = $1', [99]],
    ];
    for (const [sql, params] of statements) {
      const mine = await db.query('cmp', sql, params);
      const theirs = await plain.query(sql, params as unknown[]);
      assert.deepEqual(mine.rows, theirs.rows, sql);
      assert.equal(mine.rowCount, theirs.rowCount ?? theirs.affectedRows ?? theirs.rows.length, sql);
    }
    // The same statement again (now prepared) gives the same answer.
    const again = await db.query('cmp', 'SELECT * FROM t ORDER BY id');
    assert.deepEqual(again.rows, (await plain.query('SELECT * FROM t ORDER BY id')).rows);
  });

  it('translates errors and stays usable after them', async () => {
    await assert.rejects(db.query('dup', 'INSERT INTO t (id) VALUES ($1)', [1]), UniqueViolation);
    await assert.rejects(db.query('bad', 'SELEC 1'), DatabaseError);
    await assert.rejects(db.query('cast', 'SELECT $1::uuid', ['not a uuid']), DatabaseError);
    assert.equal((await db.query('ok', 'SELECT $1::int + 1 AS v', [1])).rows[0]?.v, 2);
  });

  it('keeps statements prepared inside a rolled-back transaction usable', async () => {
    const sql = 'INSERT INTO t (id, name) VALUES ($1, $2)';
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query('in-tx', sql, [10, 'gone']);
        throw new Error('roll back');
      }),
      /roll back/,
    );
    assert.equal((await db.query('check', 'SELECT 1 FROM t WHERE id = $1', [10])).rowCount, 0);
    await db.query('after', sql, [11, 'kept']);
    assert.equal((await db.query('check', 'SELECT 1 FROM t WHERE id = $1', [11])).rowCount, 1);
  });

  it('prepares a statement again when its table changed shape', async () => {
    const sql = 'SELECT * FROM t WHERE id = $1';
    assert.deepEqual(Object.keys((await db.query('before', sql, [11])).rows[0] ?? {}).length, 7);
    await db.exec('ALTER TABLE t ADD COLUMN extra int DEFAULT 7');
    assert.equal((await db.query('after', sql, [11])).rows[0]?.extra, 7);
  });

  it('runs statements of concurrent callers and transactions one at a time', async () => {
    const results = await Promise.all([
      db.query('a', 'SELECT 1 AS v'),
      db.transaction(async (tx) => {
        await tx.query('b', 'INSERT INTO t (id) VALUES ($1)', [20]);
        return tx.query('c', 'SELECT count(*)::int AS v FROM t WHERE id = $1', [20]);
      }),
      db.query('d', 'SELECT 3 AS v'),
    ]);
    assert.deepEqual(
      results.map((r) => r.rows[0]?.v),
      [1, 1, 3],
    );
  });
});
