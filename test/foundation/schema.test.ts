/**
 * The schema Gatehouse creates on an empty database is HBP's (contract §10.3) column by column, with
 * the same named constraints, triggers and seed rows, so Hasura metadata and SQL written for HBP keep
 * working.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { migrate } from '../../src/db/migrate.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';
import {
  HBP_COLUMNS,
  HBP_CONSTRAINTS,
  HBP_ROLES,
  MIGRATED_COLUMNS,
  MIGRATED_TRIGGERS,
  PROVIDERS,
  readSchema,
} from './hbp-schema.ts';

for (const kind of dbKinds()) {
  describe(`schema created on an empty database [${kind}]`, () => {
    let t: TestDatabase;
    let schema: Awaited<ReturnType<typeof readSchema>>;
    before(async () => {
      t = await createTestDatabase(kind, { empty: true });
      await migrate(t.db);
      schema = await readSchema(t.db);
    });
    after(() => t.drop());

    for (const table of Object.keys(HBP_COLUMNS)) {
      it(`${table} has exactly the columns of contract §10.3 (name, type, nullability, default), then Gatehouse's declared additions`, () => {
        assert.deepEqual(schema.columns[table], MIGRATED_COLUMNS[table]);
      });
    }

    it('has exactly the named constraints of contract §10.3', () => {
      assert.deepEqual(schema.constraints, [...HBP_CONSTRAINTS].sort());
    });

    it('has no index beyond those of the primary keys and unique constraints', () => {
      const implied = HBP_CONSTRAINTS.filter((c) => / (PRIMARY KEY|UNIQUE) /.test(c))
        .map((c) => c.split(' ').slice(0, 2).join(' '))
        .sort();
      assert.deepEqual(schema.indexes, implied);
    });

    it("has HBP's three updated_at triggers and Gatehouse's forget_email_proof and revoke_deleted_account", () => {
      assert.deepEqual(schema.triggers, MIGRATED_TRIGGERS);
    });

    it("seeds the roles user, anonymous, me, HBP's eight providers and oidc", () => {
      assert.deepEqual(schema.roles, HBP_ROLES);
      assert.deepEqual(schema.providers, PROVIDERS);
    });

    it('refuses an email that breaks proper_email, and accepts any case of a valid one', async () => {
      await t.db.exec(`INSERT INTO public.users (id) VALUES ('00000000-0000-4000-8000-000000000001')`);
      await assert.rejects(
        t.db.query(
          'test-bad-email',
          `INSERT INTO auth.accounts (user_id, email) VALUES ('00000000-0000-4000-8000-000000000001', 'not-an-email')`,
        ),
        /proper_email/,
      );
      await t.db.query(
        'test-good-email',
        `INSERT INTO auth.accounts (user_id, email) VALUES ('00000000-0000-4000-8000-000000000001', 'A.B+c@Example.COM')`,
      );
      const { rows } = await t.db.query<{ n: number }>(
        'test-citext',
        "SELECT count(*)::int AS n FROM auth.accounts WHERE email = 'a.b+C@example.com'",
      );
      assert.equal(rows[0]?.n, 1, 'email compares case-insensitively (citext)');
    });

    it('updated_at triggers move updated_at on update', async () => {
      await t.db.exec(
        `INSERT INTO public.users (id, updated_at) VALUES ('00000000-0000-4000-8000-000000000002', '2000-01-01')`,
      );
      await t.db.exec(
        `UPDATE public.users SET display_name = 'x' WHERE id = '00000000-0000-4000-8000-000000000002'`,
      );
      const { rows } = await t.db.query<{ y: number }>(
        'test-updated-at',
        `SELECT extract(year FROM updated_at)::int AS y FROM public.users WHERE id = '00000000-0000-4000-8000-000000000002'`,
      );
      assert.ok((rows[0]?.y ?? 0) > 2000);
    });

    it('records each migration once in auth.schema_migrations, and a second run applies nothing', async () => {
      const { rows } = await t.db.query<{ id: number; name: string }>(
        'test-recorded',
        'SELECT id, name FROM auth.schema_migrations ORDER BY id',
      );
      assert.deepEqual(rows.map((r) => `${r.id}_${r.name}`).slice(0, 2), [
        '1_hbp-initial-tables',
        '2_sessions-and-tickets',
      ]);
      assert.deepEqual(await migrate(t.db), []);
    });
  });
}
