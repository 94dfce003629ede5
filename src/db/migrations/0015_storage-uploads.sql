-- Resumable uploads (TUS 1.0.0, src/storage/tus/): one row per upload in progress. The row, not the object
-- store, is the truth about an upload: who created it (`owner`: 'admin', 'anonymous' or 'user:<id>'; any
-- other caller gets 404), where it lands (`key`), its declared length and the last durable offset. The
-- bytes are segments kept outside the served key space (a folder of their own, or a reserved prefix of the
-- bucket); a segment counts only once `upload_offset` moved past it, so a segment cut off by a kill (s3rver
-- and some S3-compatible stores keep partial PUTs) is never read. In PostgreSQL rather than beside the
-- bytes: every instance sees the same owner and offset (an S3 deployment runs several), offsets advance
-- with a compare-and-set, and the expiry sweep is one indexed scan on both backends.
CREATE SCHEMA IF NOT EXISTS storage;

CREATE TABLE IF NOT EXISTS storage.uploads (
  id text PRIMARY KEY,
  owner text NOT NULL,
  key text NOT NULL,
  upload_length bigint NOT NULL CHECK (upload_length >= 0),
  upload_offset bigint NOT NULL DEFAULT 0 CHECK (upload_offset >= 0 AND upload_offset <= upload_length),
  -- The client's Upload-Metadata, parsed (echoed by HEAD).
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  -- The quota reservation of Upload-Length made at creation (src/storage/quotas.ts), settled by the
  -- completion and released by termination or expiry.
  reservation jsonb,
  -- Set once the file is in place; the row stays (HEAD answers the full offset) until it expires.
  completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS uploads_expires_at_idx ON storage.uploads (expires_at);
