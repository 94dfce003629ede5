-- A session is one sign-in: the family of refresh tokens rotated from one another. Its id (the family id)
-- is the `sid` claim of every access token issued in it, so "this session" is named, never guessed from
-- issue times. The row says what a person sees of it (GET /auth/sessions): how and from where it began,
-- when it was last refreshed. Sessions stored before this table get a row with what their tokens tell.
CREATE TABLE IF NOT EXISTS auth.sessions (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  last_active_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  -- password, magic-link, mfa, oauth:<provider>, anonymous… NULL for sessions older than this table.
  sign_in_method text,
  user_agent text,
  ip text
);
CREATE INDEX IF NOT EXISTS sessions_account_id_idx ON auth.sessions (account_id);

INSERT INTO auth.sessions (id, account_id, created_at, last_active_at, expires_at)
  SELECT family_id, (array_agg(account_id))[1], coalesce(min(signed_in_at), min(created_at)), max(created_at),
         max(expires_at)
    FROM auth.session_tokens GROUP BY family_id
ON CONFLICT DO NOTHING;

-- Ending a session (deleting its row) ends its refresh tokens with it.
ALTER TABLE auth.session_tokens DROP CONSTRAINT IF EXISTS session_tokens_family_id_fkey;
ALTER TABLE auth.session_tokens ADD CONSTRAINT session_tokens_family_id_fkey
  FOREIGN KEY (family_id) REFERENCES auth.sessions (id) ON DELETE CASCADE;

-- Access tokens refused before their expiry: those of an ended session (`session_id`), or every token of
-- a user issued up to `issued_before` (an account disabled or deleted). Each instance holds the live rows
-- in memory and hears new ones through NOTIFY; a row is needed only until the longest access-token
-- lifetime has passed (`expires_at`), and is deleted after.
CREATE TABLE IF NOT EXISTS auth.revocations (
  id bigserial PRIMARY KEY,
  session_id uuid,
  user_id uuid,
  issued_before timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  CHECK (session_id IS NOT NULL OR (user_id IS NOT NULL AND issued_before IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS revocations_expires_at_idx ON auth.revocations (expires_at);
CREATE INDEX IF NOT EXISTS revocations_session_id_idx ON auth.revocations (session_id);
CREATE INDEX IF NOT EXISTS revocations_user_id_idx ON auth.revocations (user_id);

-- An account deleted by any path (POST /auth/delete, the CLI, or straight SQL and the GraphQL engine's
-- console, which Gatehouse never sees) has every access token refused from now on. The database does not
-- know JWT_EXPIRES_IN, so the entry is kept 30 days, far beyond any sensible access-token lifetime.
CREATE OR REPLACE FUNCTION auth.revoke_deleted_account() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  expires timestamptz := now() + interval '30 days';
BEGIN
  INSERT INTO auth.revocations (user_id, issued_before, expires_at) VALUES (OLD.user_id, now(), expires);
  PERFORM pg_notify('gatehouse_revocations', json_build_object(
    'userId', OLD.user_id,
    'issuedBefore', floor(extract(epoch FROM now()) * 1000),
    'expiresAt', floor(extract(epoch FROM expires) * 1000),
    'at', floor(extract(epoch FROM now()) * 1000))::text);
  RETURN OLD;
END
$$;
DROP TRIGGER IF EXISTS revoke_deleted_account ON auth.accounts;
CREATE TRIGGER revoke_deleted_account AFTER DELETE ON auth.accounts
  FOR EACH ROW EXECUTE FUNCTION auth.revoke_deleted_account();
