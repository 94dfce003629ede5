/** `gatehouse migrate`: the real command on an empty database, embedded and PostgreSQL. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { loadMigrations } from '../../src/db/migrate.ts';
import { tempDir } from '../helpers/app.ts';
import { runGatehouse } from '../helpers/cli.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';

for (const kind of dbKinds()) {
  describe(`gatehouse migrate [${kind}]`, () => {
    const dataDir = tempDir('gatehouse-migrate-');
    let database: TestDatabase | undefined;
    after(async () => {
      await database?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('applies every migration to an empty database, then nothing on a second run', async () => {
      const env: Record<string, string> = { DATA_DIR: dataDir };
      if (kind === 'postgres') {
        database = await createTestDatabase('postgres');
        env['DATABASE_URL'] = database.url as string;
      }
      const first = await runGatehouse(['migrate'], { env, cwd: dataDir });
      assert.equal(first.code, 0, first.err);
      assert.deepEqual(
        first.out.trimEnd().split('\n'),
        loadMigrations().map((m) => `applied ${m.id}_${m.name}`),
      );
      const { rows } = await (database?.db ?? { query: async () => ({ rows: [] }) }).query<{ n: number }>(
        'test-count',
        'SELECT count(*)::int AS n FROM auth.schema_migrations',
      );
      if (kind === 'postgres') assert.equal(rows[0]?.n, loadMigrations().length);
      const again = await runGatehouse(['migrate'], { env, cwd: dataDir });
      assert.equal(again.code, 0, again.err);
      assert.equal(again.out, '');
      assert.match(again.err, /nothing to apply: the schema is up to date/);
    });
  });
}

describe('gatehouse migrate without a database', () => {
  it('exits 1 with one line naming the failure, no stack trace', async () => {
    const dir = tempDir('gatehouse-migrate-');
    try {
      const res = await runGatehouse(['migrate'], {
        env: { DATA_DIR: dir, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' },
        cwd: dir,
      });
      assert.equal(res.code, 1);
      assert.match(res.err, /^gatehouse migrate: .*ECONNREFUSED.*\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
