-- The schema of hasura-backend-plus v2 (contract §10), written so that it can run over a database that
-- HBP already migrated: every object is created only when missing, seeds never overwrite.
CREATE SCHEMA IF NOT EXISTS auth;
CREATE EXTENSION IF NOT EXISTS citext;

CREATE OR REPLACE FUNCTION public.set_current_timestamp_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  _new record;
BEGIN
  _new := NEW;
  _new."updated_at" = now();
  RETURN _new;
END;
$$;

CREATE TABLE IF NOT EXISTS public.users (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  display_name text,
  avatar_url text,
  CONSTRAINT users_pkey PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS auth.roles (
  role text NOT NULL,
  CONSTRAINT roles_pkey PRIMARY KEY (role)
);

CREATE TABLE IF NOT EXISTS auth.providers (
  provider text NOT NULL,
  CONSTRAINT providers_pkey PRIMARY KEY (provider)
);

CREATE TABLE IF NOT EXISTS auth.accounts (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  user_id uuid NOT NULL,
  active boolean NOT NULL DEFAULT false,
  email citext,
  new_email citext,
  password_hash text,
  default_role text NOT NULL DEFAULT 'user',
  is_anonymous boolean NOT NULL DEFAULT false,
  custom_register_data jsonb,
  otp_secret text,
  mfa_enabled boolean NOT NULL DEFAULT false,
  ticket uuid NOT NULL DEFAULT gen_random_uuid(),
  ticket_expires_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT accounts_pkey PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS auth.account_roles (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  created_at timestamptz NOT NULL DEFAULT now(),
  account_id uuid NOT NULL,
  role text NOT NULL,
  CONSTRAINT account_roles_pkey PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS auth.account_providers (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  account_id uuid NOT NULL,
  auth_provider text NOT NULL,
  auth_provider_unique_id text NOT NULL,
  CONSTRAINT account_providers_pkey PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS auth.refresh_tokens (
  refresh_token uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  account_id uuid NOT NULL,
  CONSTRAINT refresh_tokens_pkey PRIMARY KEY (refresh_token)
);

-- Constraints by name, added only when a constraint of that name is not there yet.
DO $$
DECLARE
  c record;
BEGIN
  FOR c IN SELECT * FROM (VALUES
    ('auth.accounts', 'accounts_email_key', 'UNIQUE (email)'),
    ('auth.accounts', 'accounts_new_email_key', 'UNIQUE (new_email)'),
    ('auth.accounts', 'accounts_user_id_key', 'UNIQUE (user_id)'),
    ('auth.accounts', 'accounts_default_role_fkey', 'FOREIGN KEY (default_role) REFERENCES auth.roles (role) ON UPDATE CASCADE ON DELETE RESTRICT'),
    ('auth.accounts', 'accounts_user_id_fkey', 'FOREIGN KEY (user_id) REFERENCES public.users (id) ON UPDATE CASCADE ON DELETE CASCADE'),
    ('auth.accounts', 'proper_email', $c$CHECK (email ~* '^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$')$c$),
    ('auth.accounts', 'proper_new_email', $c$CHECK (new_email ~* '^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$')$c$),
    ('auth.account_roles', 'user_roles_account_id_role_key', 'UNIQUE (account_id, role)'),
    ('auth.account_roles', 'account_roles_account_id_fkey', 'FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE'),
    ('auth.account_roles', 'account_roles_role_fkey', 'FOREIGN KEY (role) REFERENCES auth.roles (role) ON UPDATE CASCADE ON DELETE RESTRICT'),
    ('auth.account_providers', 'account_providers_account_id_auth_provider_key', 'UNIQUE (account_id, auth_provider)'),
    ('auth.account_providers', 'account_providers_auth_provider_auth_provider_unique_id_key', 'UNIQUE (auth_provider, auth_provider_unique_id)'),
    ('auth.account_providers', 'account_providers_account_id_fkey', 'FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE'),
    ('auth.account_providers', 'account_providers_auth_provider_fkey', 'FOREIGN KEY (auth_provider) REFERENCES auth.providers (provider) ON UPDATE RESTRICT ON DELETE RESTRICT'),
    ('auth.refresh_tokens', 'refresh_tokens_account_id_fkey', 'FOREIGN KEY (account_id) REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE')
  ) AS t(tbl, name, def)
  LOOP
    IF NOT EXISTS (
      SELECT 1 FROM pg_constraint WHERE conname = c.name AND conrelid = c.tbl::regclass
    ) THEN
      EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.tbl, c.name, c.def);
    END IF;
  END LOOP;
END;
$$;

DROP TRIGGER IF EXISTS set_public_users_updated_at ON public.users;
CREATE TRIGGER set_public_users_updated_at BEFORE UPDATE ON public.users
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();
DROP TRIGGER IF EXISTS set_auth_accounts_updated_at ON auth.accounts;
CREATE TRIGGER set_auth_accounts_updated_at BEFORE UPDATE ON auth.accounts
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();
DROP TRIGGER IF EXISTS set_auth_account_providers_updated_at ON auth.account_providers;
CREATE TRIGGER set_auth_account_providers_updated_at BEFORE UPDATE ON auth.account_providers
  FOR EACH ROW EXECUTE FUNCTION public.set_current_timestamp_updated_at();

INSERT INTO auth.roles (role) VALUES ('user'), ('anonymous'), ('me') ON CONFLICT DO NOTHING;
INSERT INTO auth.providers (provider) VALUES
  ('github'), ('facebook'), ('twitter'), ('google'), ('apple'), ('linkedin'), ('windowslive'), ('spotify')
  ON CONFLICT DO NOTHING;
