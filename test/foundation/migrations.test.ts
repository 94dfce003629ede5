/**
 * The migration runner: upgrading a database HBP already migrated keeps its rows; a failing migration
 * leaves the schema as it was; a changed migration stops the start; instances starting together on one
 * PostgreSQL both come up (advisory lock).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { openPostgres } from '../../src/db/database.ts';
import { loadMigrations, migrate } from '../../src/db/migrate.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';
import {
  HBP_CONSTRAINTS,
  HBP_DATA_SQL,
  HBP_MIGRATED_SQL,
  HBP_ROWS,
  MIGRATED_COLUMNS,
  MIGRATED_TRIGGERS,
  PROVIDERS,
  readSchema,
} from './hbp-schema.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const KEPT_TABLES = [
  'public.users',
  'auth.accounts',
  'auth.account_roles',
  'auth.account_providers',
  'auth.roles',
  'auth.providers',
  'auth.migrations',
];

for (const kind of dbKinds()) {
  describe(`migrating [${kind}]`, () => {
    it('over an HBP-migrated database keeps every row and carries live refresh tokens over as sha256 hashes', async () => {
      const t = await createTestDatabase(kind, { empty: true });
      try {
        await t.db.exec(HBP_MIGRATED_SQL);
        await t.db.exec(HBP_DATA_SQL);
        const snapshot = async () => {
          const out: Record<string, unknown[]> = {};
          for (const table of KEPT_TABLES) {
            out[table] = (await t.db.query('test-snapshot', `SELECT * FROM ${table} ORDER BY 1`)).rows;
          }
          return out;
        };
        const before = await snapshot();

        assert.deepEqual(await migrate(t.db), [
          '1_hbp-initial-tables',
          '2_sessions-and-tickets',
          ...laterMigrations(),
        ]);

        // The generic OpenID Connect provider joins HBP's eight; nothing else changes.
        before['auth.providers'] = [...(before['auth.providers'] ?? []), { provider: 'oidc' }].sort((a, b) =>
          String((a as { provider: string }).provider).localeCompare((b as { provider: string }).provider),
        );
        // Accounts gain Gatehouse's nullable disabled_at (migration 0009), unset: no account is blocked.
        before['auth.accounts'] = (before['auth.accounts'] ?? []).map((r) => ({
          ...(r as object),
          disabled_at: null,
        }));
        assert.deepEqual(
          await snapshot(),
          before,
          'users, accounts, roles, providers and auth.migrations unchanged',
        );
        const users = await t.db.query<{ name: string }>('test-users', 'SELECT name FROM public.users');
        assert.deepEqual(users.rows, [{ name: 'Ada Lovelace' }], "the operator's extra column is kept");

        const sessions = await t.db.query<{ token_hash: string; account_id: string }>(
          'test-sessions',
          'SELECT token_hash, account_id FROM auth.session_tokens',
        );
        assert.deepEqual(sessions.rows, [
          { token_hash: sha256(HBP_ROWS.liveToken), account_id: HBP_ROWS.accountId },
        ]);
        const plain = await t.db.query('test-plain', 'SELECT * FROM auth.refresh_tokens');
        assert.equal(plain.rowCount, 0, 'no refresh token is left in plain text');

        const schema = await readSchema(t.db);
        const { 'public.users': users_, ...authTables } = schema.columns;
        const { 'public.users': expectedUsers, ...expectedAuth } = MIGRATED_COLUMNS;
        assert.deepEqual(authTables, expectedAuth);
        assert.deepEqual(users_, [...(expectedUsers ?? []), ['name', 'text', true, null]]);
        assert.deepEqual(schema.constraints, [...HBP_CONSTRAINTS].sort());
        assert.deepEqual(schema.triggers, MIGRATED_TRIGGERS);
        assert.deepEqual(schema.roles, ['anonymous', 'editor', 'me', 'super-admin', 'user']);
        assert.deepEqual(schema.providers, PROVIDERS);

        assert.deepEqual(await migrate(t.db), [], 'a second start applies nothing');
      } finally {
        await t.drop();
      }
    });

    it('a failing migration leaves the schema as it was', async () => {
      const t = await createTestDatabase(kind, { empty: true });
      try {
        const broken = [
          ...loadMigrations(),
          {
            id: 9999,
            name: 'broken',
            sql: 'CREATE TABLE auth.half_done (x int); SELECT 1/0;',
            checksum: 'x',
          },
        ];
        await assert.rejects(migrate(t.db, broken), /division by zero/);
        const { rows } = await t.db.query<{ n: number }>(
          'test-auth-schema',
          "SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = 'auth'",
        );
        assert.equal(rows[0]?.n, 0, 'not even the auth schema was left behind');

        await migrate(t.db);
        const applied = await t.db.query('test-applied', 'SELECT id FROM auth.schema_migrations');
        await assert.rejects(migrate(t.db, broken), /division by zero/);
        const still = await t.db.query('test-applied', 'SELECT id FROM auth.schema_migrations');
        assert.deepEqual(still.rows, applied.rows);
        const half = await t.db.query<{ t: string | null }>(
          'test-half',
          "SELECT to_regclass('auth.half_done')::text AS t",
        );
        assert.equal(half.rows[0]?.t, null);
      } finally {
        await t.drop();
      }
    });

    it('upgrades a database that recorded the old numbering (1, 2, 4, 5…) without applying anything again', async () => {
      const t = await createTestDatabase(kind, { empty: true });
      try {
        await migrate(t.db);
        // As a database migrated before the gap was closed recorded them: 0003_mfa as 4_mfa, and so on.
        await t.db.exec('UPDATE auth.schema_migrations SET id = -(id + 1) WHERE id >= 3');
        await t.db.exec('UPDATE auth.schema_migrations SET id = -id WHERE id < 0');
        const before = await t.db.query<{ id: number; name: string; checksum: string; applied_at: Date }>(
          'test-old-numbers',
          'SELECT id, name, checksum, applied_at FROM auth.schema_migrations ORDER BY id',
        );
        assert.deepEqual(
          before.rows.slice(0, 4).map((r) => `${r.id}_${r.name}`),
          ['1_hbp-initial-tables', '2_sessions-and-tickets', '4_mfa', '5_account-locales'],
        );

        assert.deepEqual(await migrate(t.db), [], 'nothing is applied twice');
        const afterRows = await t.db.query<{ id: number; name: string; checksum: string; applied_at: Date }>(
          'test-new-numbers',
          'SELECT id, name, checksum, applied_at FROM auth.schema_migrations ORDER BY id',
        );
        assert.deepEqual(
          afterRows.rows,
          before.rows.map((r, i) => ({ ...r, id: i + 1 })),
          'records renumbered, checksums and times kept',
        );
        assert.deepEqual(await migrate(t.db), [], 'and a further start finds nothing to do');
      } finally {
        await t.drop();
      }
    });

    it('refuses to start when an applied migration file was changed', async () => {
      const t = await createTestDatabase(kind);
      try {
        await migrate(t.db);
        const changed = loadMigrations().map((m, i) =>
          i === 0 ? { ...m, sql: `${m.sql}\n-- edited`, checksum: sha256(`${m.sql}\n-- edited`) } : m,
        );
        await assert.rejects(
          migrate(t.db, changed),
          /migration 1_hbp-initial-tables was changed after it was applied/,
        );
      } finally {
        await t.drop();
      }
    });
  });
}

describe('migration files', () => {
  it('are numbered 1, 2, 3… without a gap or a repeat, with names that stay unique', () => {
    const all = loadMigrations();
    assert.deepEqual(
      all.map((m) => m.id),
      all.map((_, i) => i + 1),
      'a new migration takes the next number; rename to close a gap (records follow by name)',
    );
    assert.equal(new Set(all.map((m) => m.name)).size, all.length, 'names identify migrations');
  });
});

/** Migrations other features add after 0002 (the upgrade applies them too). */
function laterMigrations(): string[] {
  return loadMigrations()
    .filter((m) => m.id > 2)
    .map((m) => `${m.id}_${m.name}`);
}

if (runsHere('postgres', 'instances starting at the same moment on one PostgreSQL')) {
  describe('instances starting at the same moment on one PostgreSQL', () => {
    const dirs: string[] = [];
    after(() => {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    it('all come up, and each migration is applied exactly once', async () => {
      const t = await createTestDatabase('postgres');
      try {
        const log = pino({ level: 'silent' });
        const starts = Array.from({ length: 4 }, () => {
          const dataDir = tempDir('gatehouse-race-');
          dirs.push(dataDir);
          const config = configFrom({
            DATABASE_URL: t.url,
            DATA_DIR: dataDir,
            CUSTOM_DIR: path.join(dataDir, 'custom'),
            LOG_LEVEL: 'silent',
          });
          return createContext(config, { log });
        });
        const results = await Promise.allSettled(starts);
        for (const r of results) if (r.status === 'fulfilled') await closeContext(r.value);
        assert.deepEqual(
          results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'up')),
          ['up', 'up', 'up', 'up'],
        );
        const check = openPostgres(String(t.url), 1);
        try {
          const { rows } = await check.query<{ id: number; n: number }>(
            'test-applied-once',
            'SELECT id, count(*)::int AS n FROM auth.schema_migrations GROUP BY id ORDER BY id',
          );
          assert.deepEqual(
            rows,
            loadMigrations().map((m) => ({ id: m.id, n: 1 })),
          );
        } finally {
          await check.close();
        }
      } finally {
        await t.drop();
      }
    });
  });
}
