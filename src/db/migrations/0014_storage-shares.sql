-- Share links (POST /storage/shares): one file, downloadable without signing in by whoever holds the link,
-- until the link expires, is revoked or has served `max_downloads`. The link itself is a secret of 192
-- random bits and is stored only as its SHA-256 hash (`token_hash`); `id` is the row's own handle, which
-- listings show and DELETE takes, and which reveals nothing of the link.
--
-- `owner_id` is the creator's user id (x-hasura-user-id, as `storage.files.owner_id`). `account_id` is
-- their account when they have one here (tokens of another issuer have none): deleting the account (or its
-- user) deletes its links.
CREATE SCHEMA IF NOT EXISTS storage;

CREATE TABLE IF NOT EXISTS storage.shares (
  id uuid PRIMARY KEY,
  token_hash bytea NOT NULL,
  key text NOT NULL,
  owner_id uuid NOT NULL,
  account_id uuid REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  max_downloads integer CHECK (max_downloads IS NULL OR max_downloads >= 1),
  downloads integer NOT NULL DEFAULT 0 CHECK (downloads >= 0),
  revoked_at timestamptz,
  CONSTRAINT shares_token_hash_key UNIQUE (token_hash)
);
-- GET /storage/shares lists one owner's links, newest first.
CREATE INDEX IF NOT EXISTS shares_owner_idx ON storage.shares (owner_id, created_at DESC);
-- Deleting a file revokes the live links to it.
CREATE INDEX IF NOT EXISTS shares_key_idx ON storage.shares (key) WHERE revoked_at IS NULL;
-- The account's links go with it (the foreign key's cascade looks them up by account).
CREATE INDEX IF NOT EXISTS shares_account_idx ON storage.shares (account_id);
