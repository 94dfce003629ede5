/**
 * HBP v2's schema as contract §10.3 states it: the expected columns, constraints and triggers (what the
 * schema tests compare against), and a script that builds an HBP-migrated database the way HBP left it
 * (with its `auth.migrations` bookkeeping), for the upgrade tests. Written from the contract, not from
 * HBP's files.
 */
import type { Queryable } from '../../src/db/database.ts';

type Column = [name: string, udt: string, nullable: boolean, dflt: string | null];

const id: Column = ['id', 'uuid', false, 'gen_random_uuid()'];
const createdAt: Column = ['created_at', 'timestamptz', false, 'now()'];
const updatedAt: Column = ['updated_at', 'timestamptz', false, 'now()'];

/** Columns in declaration order, per table. */
export const HBP_COLUMNS: Record<string, Column[]> = {
  'auth.account_providers': [
    id,
    createdAt,
    updatedAt,
    ['account_id', 'uuid', false, null],
    ['auth_provider', 'text', false, null],
    ['auth_provider_unique_id', 'text', false, null],
  ],
  'auth.account_roles': [id, createdAt, ['account_id', 'uuid', false, null], ['role', 'text', false, null]],
  'auth.accounts': [
    id,
    createdAt,
    updatedAt,
    ['user_id', 'uuid', false, null],
    ['active', 'bool', false, 'false'],
    ['email', 'citext', true, null],
    ['new_email', 'citext', true, null],
    ['password_hash', 'text', true, null],
    ['default_role', 'text', false, "'user'::text"],
    ['is_anonymous', 'bool', false, 'false'],
    ['custom_register_data', 'jsonb', true, null],
    ['otp_secret', 'text', true, null],
    ['mfa_enabled', 'bool', false, 'false'],
    ['ticket', 'uuid', false, 'gen_random_uuid()'],
    ['ticket_expires_at', 'timestamptz', false, 'now()'],
  ],
  'auth.providers': [['provider', 'text', false, null]],
  'auth.refresh_tokens': [
    ['refresh_token', 'uuid', false, null],
    createdAt,
    ['expires_at', 'timestamptz', false, null],
    ['account_id', 'uuid', false, null],
  ],
  'auth.roles': [['role', 'text', false, null]],
  'public.users': [
    id,
    createdAt,
    updatedAt,
    ['display_name', 'text', true, null],
    ['avatar_url', 'text', true, null],
  ],
};

/**
 * Columns Gatehouse adds to HBP's tables, after HBP's (nullable, so HBP-era clients and rows are not
 * affected): auth.accounts.disabled_at, an operator's block (migration 0009); email_verified_at and
 * email_verified_by, when and how the address was proven (migration 0010).
 */
export const GATEHOUSE_ADDED_COLUMNS: Record<string, Column[]> = {
  'auth.accounts': [
    ['disabled_at', 'timestamptz', true, null],
    ['email_verified_at', 'timestamptz', true, null],
    ['email_verified_by', 'text', true, null],
  ],
};

/** The columns a migrated database has: HBP's, then Gatehouse's additions. */
export const MIGRATED_COLUMNS: Record<string, Column[]> = Object.fromEntries(
  Object.entries(HBP_COLUMNS).map(([t, cols]) => [t, [...cols, ...(GATEHOUSE_ADDED_COLUMNS[t] ?? [])]]),
);

const EMAIL_RE = `'^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$'::citext`;

/** `table constraint-name definition`, as pg_get_constraintdef prints it. */
export const HBP_CONSTRAINTS: string[] = [
  'auth.account_providers account_providers_account_id_auth_provider_key UNIQUE (account_id, auth_provider)',
  'auth.account_providers account_providers_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts(id) ON UPDATE CASCADE ON DELETE CASCADE',
  'auth.account_providers account_providers_auth_provider_auth_provider_unique_id_key UNIQUE (auth_provider, auth_provider_unique_id)',
  'auth.account_providers account_providers_auth_provider_fkey FOREIGN KEY (auth_provider) REFERENCES auth.providers(provider) ON UPDATE RESTRICT ON DELETE RESTRICT',
  'auth.account_providers account_providers_pkey PRIMARY KEY (id)',
  'auth.account_roles account_roles_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts(id) ON UPDATE CASCADE ON DELETE CASCADE',
  'auth.account_roles account_roles_pkey PRIMARY KEY (id)',
  'auth.account_roles account_roles_role_fkey FOREIGN KEY (role) REFERENCES auth.roles(role) ON UPDATE CASCADE ON DELETE RESTRICT',
  'auth.account_roles user_roles_account_id_role_key UNIQUE (account_id, role)',
  'auth.accounts accounts_default_role_fkey FOREIGN KEY (default_role) REFERENCES auth.roles(role) ON UPDATE CASCADE ON DELETE RESTRICT',
  'auth.accounts accounts_email_key UNIQUE (email)',
  'auth.accounts accounts_new_email_key UNIQUE (new_email)',
  'auth.accounts accounts_pkey PRIMARY KEY (id)',
  'auth.accounts accounts_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(id) ON UPDATE CASCADE ON DELETE CASCADE', // public is on the search path
  'auth.accounts accounts_user_id_key UNIQUE (user_id)',
  `auth.accounts proper_email CHECK ((email ~* ${EMAIL_RE}))`,
  `auth.accounts proper_new_email CHECK ((new_email ~* ${EMAIL_RE}))`,
  'auth.providers providers_pkey PRIMARY KEY (provider)',
  'auth.refresh_tokens refresh_tokens_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts(id) ON UPDATE CASCADE ON DELETE CASCADE',
  'auth.refresh_tokens refresh_tokens_pkey PRIMARY KEY (refresh_token)',
  'auth.roles roles_pkey PRIMARY KEY (role)',
  'public.users users_pkey PRIMARY KEY (id)',
];

/** `table trigger-name timing event orientation statement`. */
export const HBP_TRIGGERS: string[] = [
  'auth.account_providers set_auth_account_providers_updated_at BEFORE UPDATE ROW EXECUTE FUNCTION set_current_timestamp_updated_at()',
  'auth.accounts set_auth_accounts_updated_at BEFORE UPDATE ROW EXECUTE FUNCTION set_current_timestamp_updated_at()',
  'public.users set_public_users_updated_at BEFORE UPDATE ROW EXECUTE FUNCTION set_current_timestamp_updated_at()',
];

/**
 * Triggers Gatehouse adds to HBP's tables: a changed address forgets its proof (migration 0010), and a
 * deleted account's access tokens are revoked whatever deleted it (migration 0011).
 */
export const GATEHOUSE_ADDED_TRIGGERS: string[] = [
  'auth.accounts forget_email_proof BEFORE UPDATE ROW EXECUTE FUNCTION auth.forget_email_proof()',
  'auth.accounts revoke_deleted_account AFTER DELETE ROW EXECUTE FUNCTION auth.revoke_deleted_account()',
];

/** The triggers a migrated database has, in readSchema's order. */
export const MIGRATED_TRIGGERS: string[] = [...HBP_TRIGGERS, ...GATEHOUSE_ADDED_TRIGGERS].sort();

export const HBP_ROLES = ['anonymous', 'me', 'user'];
export const HBP_PROVIDERS = [
  'apple',
  'facebook',
  'github',
  'google',
  'linkedin',
  'spotify',
  'twitter',
  'windowslive',
];
/** HBP's providers and Gatehouse's generic OpenID Connect one (migration 0007). */
export const PROVIDERS = [...HBP_PROVIDERS, 'oidc'].sort();

const HBP_TABLES = Object.keys(HBP_COLUMNS);

/** What the database has, in the same shapes as the expectations above. */
export async function readSchema(db: Queryable) {
  const cols = await db.query<{
    t: string;
    column_name: string;
    udt_name: string;
    is_nullable: string;
    column_default: string | null;
  }>(
    'test-columns',
    `SELECT table_schema || '.' || table_name AS t, column_name, udt_name, is_nullable, column_default
       FROM information_schema.columns
      WHERE table_schema || '.' || table_name = ANY($1)
      ORDER BY t, ordinal_position`,
    [HBP_TABLES],
  );
  const columns: Record<string, Column[]> = {};
  for (const c of cols.rows) {
    const list = columns[c.t] ?? [];
    list.push([c.column_name, c.udt_name, c.is_nullable === 'YES', c.column_default]);
    columns[c.t] = list;
  }
  const cons = await db.query<{ line: string }>(
    'test-constraints',
    `SELECT n.nspname || '.' || r.relname || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) AS line
       FROM pg_constraint c
       JOIN pg_class r ON r.oid = c.conrelid
       JOIN pg_namespace n ON n.oid = r.relnamespace
      WHERE n.nspname || '.' || r.relname = ANY($1)
        AND c.contype <> 'n' -- PostgreSQL 18 lists NOT NULL as constraints; columns cover nullability
      ORDER BY line`,
    [HBP_TABLES],
  );
  const trig = await db.query<{ line: string }>(
    'test-triggers',
    `SELECT event_object_schema || '.' || event_object_table || ' ' || trigger_name || ' ' || action_timing
            || ' ' || event_manipulation || ' ' || action_orientation || ' ' || action_statement AS line
       FROM information_schema.triggers
      WHERE event_object_schema || '.' || event_object_table = ANY($1)
      ORDER BY line`,
    [HBP_TABLES],
  );
  const idx = await db.query<{ line: string }>(
    'test-indexes',
    `SELECT schemaname || '.' || tablename || ' ' || indexname AS line
       FROM pg_indexes WHERE schemaname || '.' || tablename = ANY($1) ORDER BY line`,
    [HBP_TABLES],
  );
  const roles = await db.query<{ role: string }>('test-roles', 'SELECT role FROM auth.roles ORDER BY role');
  const providers = await db.query<{ provider: string }>(
    'test-providers',
    'SELECT provider FROM auth.providers ORDER BY provider',
  );
  return {
    columns,
    // Sorted here, not in SQL, so that the database's collation does not matter.
    constraints: cons.rows.map((r) => r.line).sort(),
    triggers: trig.rows.map((r) => r.line).sort(),
    indexes: idx.rows.map((r) => r.line).sort(),
    roles: roles.rows.map((r) => r.role),
    providers: providers.rows.map((r) => r.provider),
  };
}

/**
 * The database HBP leaves behind: prerequisites (§10.1), its bookkeeping table `auth.migrations` with its
 * two rows (§10.2), the tables of §10.3 with their seeds, and what operators typically add (a `name`
 * column on users, extra roles).
 */
export const HBP_MIGRATED_SQL = `
CREATE SCHEMA IF NOT EXISTS auth;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE OR REPLACE FUNCTION public.set_current_timestamp_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.updated_at = now();
  RETURN NEW;
END;
$$;

CREATE TABLE auth.migrations (
  id integer PRIMARY KEY,
  name varchar(100) UNIQUE NOT NULL,
  hash varchar(40) NOT NULL,
  executed_at timestamp DEFAULT current_timestamp
);
-- The hashes stand in for HBP's sha1 values; Gatehouse never reads them.
INSERT INTO auth.migrations (id, name, hash) VALUES
  (0, 'create-migrations-table', 'e18db593bcde2aca2a408c4d1100f6abba2195df'),
  (1, 'create-initial-tables', 'c6ce6c0e8db9d4a6e06b41a2e2e8e45e0b9a7c3d');

CREATE FUNCTION auth.create_constraint_if_not_exists(t_name text, c_name text, constraint_sql text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT constraint_name FROM information_schema.constraint_column_usage
                 WHERE table_name = t_name AND constraint_name = c_name) THEN
    EXECUTE constraint_sql;
  END IF;
END;
$$;

CREATE TABLE public.users (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  created_at timestamptz DEFAULT now() NOT NULL,
  updated_at timestamptz DEFAULT now() NOT NULL,
  display_name text,
  avatar_url text,
  CONSTRAINT users_pkey PRIMARY KEY (id)
);
CREATE TABLE auth.roles (role text NOT NULL, CONSTRAINT roles_pkey PRIMARY KEY (role));
CREATE TABLE auth.providers (provider text NOT NULL, CONSTRAINT providers_pkey PRIMARY KEY (provider));
CREATE TABLE auth.accounts (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  created_at timestamptz DEFAULT now() NOT NULL,
  updated_at timestamptz DEFAULT now() NOT NULL,
  user_id uuid NOT NULL,
  active boolean DEFAULT false NOT NULL,
  email citext,
  new_email citext,
  password_hash text,
  default_role text DEFAULT 'user' NOT NULL,
  is_anonymous boolean DEFAULT false NOT NULL,
  custom_register_data jsonb,
  otp_secret text,
  mfa_enabled boolean DEFAULT false NOT NULL,
  ticket uuid DEFAULT gen_random_uuid() NOT NULL,
  ticket_expires_at timestamptz DEFAULT now() NOT NULL,
  CONSTRAINT accounts_pkey PRIMARY KEY (id),
  CONSTRAINT accounts_email_key UNIQUE (email),
  CONSTRAINT accounts_new_email_key UNIQUE (new_email),
  CONSTRAINT accounts_user_id_key UNIQUE (user_id),
  CONSTRAINT proper_email CHECK (email ~* '^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$'),
  CONSTRAINT proper_new_email CHECK (new_email ~* '^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$')
);
CREATE TABLE auth.account_roles (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  created_at timestamptz DEFAULT now() NOT NULL,
  account_id uuid NOT NULL,
  role text NOT NULL,
  CONSTRAINT account_roles_pkey PRIMARY KEY (id),
  CONSTRAINT user_roles_account_id_role_key UNIQUE (account_id, role)
);
CREATE TABLE auth.account_providers (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  created_at timestamptz DEFAULT now() NOT NULL,
  updated_at timestamptz DEFAULT now() NOT NULL,
  account_id uuid NOT NULL,
  auth_provider text NOT NULL,
  auth_provider_unique_id text NOT NULL,
  CONSTRAINT account_providers_pkey PRIMARY KEY (id),
  CONSTRAINT account_providers_account_id_auth_provider_key UNIQUE (account_id, auth_provider),
  CONSTRAINT account_providers_auth_provider_auth_provider_unique_id_key UNIQUE (auth_provider, auth_provider_unique_id)
);
CREATE TABLE auth.refresh_tokens (
  refresh_token uuid NOT NULL,
  created_at timestamptz DEFAULT now() NOT NULL,
  expires_at timestamptz NOT NULL,
  account_id uuid NOT NULL,
  CONSTRAINT refresh_tokens_pkey PRIMARY KEY (refresh_token)
);

SELECT auth.create_constraint_if_not_exists('accounts', 'accounts_default_role_fkey',
  'ALTER TABLE auth.accounts ADD CONSTRAINT accounts_default_role_fkey FOREIGN KEY (default_role) REFERENCES auth.roles (role) ON UPDATE CASCADE ON DELETE RESTRICT');
SELECT auth.create_constraint_if_not_exists('accounts', 'accounts_user_id_fkey',
  'ALTER TABLE auth.accounts ADD CONSTRAINT accounts_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users (id) ON UPDATE CASCADE ON DELETE CASCADE');
SELECT auth.create_constraint_if_not_exists('account_roles', 'account_roles_account_id_fkey',
  'ALTER TABLE auth.account_roles ADD CONSTRAINT account_roles_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE');
SELECT auth.create_constraint_if_not_exists('account_roles', 'account_roles_role_fkey',
  'ALTER TABLE auth.account_roles ADD CONSTRAINT account_roles_role_fkey FOREIGN KEY (role) REFERENCES auth.roles (role) ON UPDATE CASCADE ON DELETE RESTRICT');
SELECT auth.create_constraint_if_not_exists('account_providers', 'account_providers_account_id_fkey',
  'ALTER TABLE auth.account_providers ADD CONSTRAINT account_providers_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE');
SELECT auth.create_constraint_if_not_exists('account_providers', 'account_providers_auth_provider_fkey',
  'ALTER TABLE auth.account_providers ADD CONSTRAINT account_providers_auth_provider_fkey FOREIGN KEY (auth_provider) REFERENCES auth.providers (provider) ON UPDATE RESTRICT ON DELETE RESTRICT');
SELECT auth.create_constraint_if_not_exists('refresh_tokens', 'refresh_tokens_account_id_fkey',
  'ALTER TABLE auth.refresh_tokens ADD CONSTRAINT refresh_tokens_account_id_fkey FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE');

CREATE TRIGGER set_public_users_updated_at BEFORE UPDATE ON public.users
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();
CREATE TRIGGER set_auth_accounts_updated_at BEFORE UPDATE ON auth.accounts
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();
CREATE TRIGGER set_auth_account_providers_updated_at BEFORE UPDATE ON auth.account_providers
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();

INSERT INTO auth.roles (role) VALUES ('user'), ('anonymous'), ('me') ON CONFLICT DO NOTHING;
INSERT INTO auth.providers (provider) VALUES
  ('github'), ('facebook'), ('twitter'), ('google'), ('apple'), ('linkedin'), ('windowslive'), ('spotify')
  ON CONFLICT DO NOTHING;

-- What operators add on top (the upstream tests do the same).
ALTER TABLE public.users ADD COLUMN name text NULL;
INSERT INTO auth.roles (role) VALUES ('editor'), ('super-admin');
`;

export const HBP_ROWS = {
  userId: '5a7f1c2e-1111-4a4a-9c9c-000000000001',
  accountId: '5a7f1c2e-2222-4a4a-9c9c-000000000002',
  liveToken: '5a7f1c2e-3333-4a4a-9c9c-000000000003',
  expiredToken: '5a7f1c2e-4444-4a4a-9c9c-000000000004',
};

/** Rows an HBP deployment has: a user with an account, roles, a provider link and two refresh tokens. */
export const HBP_DATA_SQL = `
INSERT INTO public.users (id, display_name, name) VALUES ('${HBP_ROWS.userId}', 'Ada', 'Ada Lovelace');
INSERT INTO auth.accounts (id, user_id, active, email, password_hash, default_role, otp_secret, mfa_enabled)
  VALUES ('${HBP_ROWS.accountId}', '${HBP_ROWS.userId}', true, 'Ada@Example.com',
          '$2a$10$CwTycUXWue0Thq9StjUM0uJ8.0mV7Ji1/ppnNqYyY8TTq5fAmHaNi', 'editor', 'JBSWY3DPEHPK3PXP', true);
INSERT INTO auth.account_roles (account_id, role) VALUES
  ('${HBP_ROWS.accountId}', 'user'), ('${HBP_ROWS.accountId}', 'editor');
INSERT INTO auth.account_providers (account_id, auth_provider, auth_provider_unique_id)
  VALUES ('${HBP_ROWS.accountId}', 'github', '424242');
INSERT INTO auth.refresh_tokens (refresh_token, expires_at, account_id) VALUES
  ('${HBP_ROWS.liveToken}', now() + interval '30 days', '${HBP_ROWS.accountId}'),
  ('${HBP_ROWS.expiredToken}', now() - interval '1 day', '${HBP_ROWS.accountId}');
`;
