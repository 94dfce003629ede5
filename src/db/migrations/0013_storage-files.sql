-- The files table: one row per stored object, kept in step with the object store (storage/files.ts).
-- A row is what makes a file visible: it is written in the transaction that completes an upload and
-- removed with the delete, and an object without one is neither listed nor served until reconciled.
CREATE SCHEMA IF NOT EXISTS storage;

CREATE TABLE IF NOT EXISTS storage.files (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Byte order ("C"): the unique index then serves both the key lookup and prefix scans (LIKE 'a/b/%'
  -- with keyset pagination), in the order S3 lists keys, whatever the database's own collation.
  key text COLLATE "C" NOT NULL,
  size bigint NOT NULL CHECK (size >= 0),
  content_type text NOT NULL,
  etag text NOT NULL,
  -- The file token (HBP's x-amz-meta-token), copied so that listings and zips need no store read. The
  -- store keeps the authoritative copy. Not exported to the GraphQL engine's roles (it is a credential).
  token text NOT NULL DEFAULT '',
  -- The uploader of the current version; NULL for the admin secret or an imported object. A user's
  -- deletion leaves their files in place, owned by no one (and no longer counted in any quota).
  owner_id uuid REFERENCES public.users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- The object's last-modified time in the store (ETag and Last-Modified of downloads come from there).
  updated_at timestamptz NOT NULL DEFAULT now(),
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  CONSTRAINT files_key_key UNIQUE (key)
);
-- A user's usage: the sum of the sizes they own, read from the index alone.
CREATE INDEX IF NOT EXISTS files_owner_id_idx ON storage.files (owner_id) INCLUDE (size);

-- An upload in progress: its quota reservation and, as important, its intent. It is written before the
-- object and deleted in the transaction that writes the row, so an object left without a row by a
-- crash is found here (and given its uploader as owner) once the reservation's lease has run out.
CREATE TABLE IF NOT EXISTS storage.upload_reservations (
  id uuid PRIMARY KEY,
  key text COLLATE "C" NOT NULL,
  -- The uploader (a token's user id); NULL for the admin secret, whose uploads count in no quota.
  owner_id uuid,
  bytes bigint NOT NULL CHECK (bytes >= 0),
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS upload_reservations_owner_idx ON storage.upload_reservations (owner_id, expires_at);
CREATE INDEX IF NOT EXISTS upload_reservations_expires_idx ON storage.upload_reservations (expires_at);

-- Per-account quota overrides (gatehouse users set-quota); without a row, STORAGE_QUOTA_BYTES applies.
CREATE TABLE IF NOT EXISTS storage.quotas (
  user_id uuid PRIMARY KEY REFERENCES public.users (id) ON DELETE CASCADE,
  -- NULL: unlimited.
  quota_bytes bigint CHECK (quota_bytes >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Object stores whose existing objects have been imported into storage.files (HBP deployments, or
-- objects that predate this table), by a name of the store ("fs:<folder>", "s3:<endpoint>/<bucket>").
CREATE TABLE IF NOT EXISTS storage.imports (
  store text PRIMARY KEY,
  imported_at timestamptz NOT NULL,
  files bigint NOT NULL
);
