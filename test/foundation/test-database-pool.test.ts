/**
 * The reuse of PGlite databases between suites (test/helpers/db.ts) must be invisible: a suite gets a
 * database equal to a fresh one whatever the suite before it did, and a handle whose lease ended can
 * never reach the next suite's data.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DatabaseUnavailable } from '../../src/db/database.ts';
import { createTestDatabase } from '../helpers/db.ts';

const count = async (db: Awaited<ReturnType<typeof createTestDatabase>>['db'], table: string) =>
  (await db.query<{ n: number }>('test-count', `SELECT count(*)::int AS n FROM ${table}`)).rows[0]?.n;

describe('migrated PGlite test databases', () => {
  it('start as the template left them after a suite wrote rows, removed seeds and changed settings', async () => {
    const first = await createTestDatabase('pglite');
    const providers = await count(first.db, 'auth.providers');
    const migrations = await count(first.db, 'auth.schema_migrations');
    assert.ok((providers ?? 0) > 0 && (migrations ?? 0) > 0, 'the migrations seed rows');
    await first.db.exec(`
      INSERT INTO public.users (id, display_name) VALUES (gen_random_uuid(), 'left behind');
      DELETE FROM auth.providers;
      INSERT INTO auth.roles (role) VALUES ('left-behind-role');
      SET TIME ZONE 'Asia/Tokyo';`);
    await first.drop();

    const second = await createTestDatabase('pglite');
    try {
      assert.equal(await count(second.db, 'public.users'), 0);
      assert.equal(await count(second.db, 'auth.providers'), providers);
      assert.equal(await count(second.db, 'auth.schema_migrations'), migrations);
      assert.equal(await count(second.db, "auth.roles WHERE role = 'left-behind-role'"), 0);
      const tz = await second.db.query<{ tz: string }>('test-tz', 'SHOW TIME ZONE');
      assert.notEqual(tz.rows[0]?.tz, 'Asia/Tokyo');
    } finally {
      await second.drop();
    }
  });

  it('never hand on a database whose schema a suite changed', async () => {
    const first = await createTestDatabase('pglite');
    await first.db.exec(
      'CREATE TABLE public.left_behind (id int); ALTER TABLE public.users ADD COLUMN extra text',
    );
    await first.drop();
    const second = await createTestDatabase('pglite');
    try {
      const { rows } = await second.db.query<{ n: number }>(
        'test-columns',
        `SELECT count(*)::int AS n FROM information_schema.columns
          WHERE (table_schema, table_name) = ('public', 'left_behind')
             OR (table_schema, table_name, column_name) = ('public', 'users', 'extra')`,
      );
      assert.equal(rows[0]?.n, 0);
    } finally {
      await second.drop();
    }
  });

  it('refuse every statement through a handle once it is closed, as a closed database does', async () => {
    const first = await createTestDatabase('pglite');
    await first.db.close();
    await assert.rejects(first.db.query('test-after-close', 'SELECT 1'), DatabaseUnavailable);
    await assert.rejects(
      first.db.transaction(async () => {}),
      DatabaseUnavailable,
    );
    await assert.rejects(first.db.ping(), DatabaseUnavailable);
    const second = await createTestDatabase('pglite');
    await first.drop();
    assert.equal(await count(second.db, 'public.users'), 0, 'the next lease is unaffected');
    await second.drop();
  });
});
