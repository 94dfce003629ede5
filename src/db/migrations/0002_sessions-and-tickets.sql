-- Gatehouse's own session and ticket tables. HBP's auth.refresh_tokens and the untyped ticket columns on
-- auth.accounts stay in place (Hasura clients may track them) but are no longer written.

-- One row per refresh token, stored only as the SHA-256 hex of the token. Tokens rotated from one another
-- share a family_id (one sign-in); reusing a rotated token after the grace interval revokes the family.
CREATE TABLE IF NOT EXISTS auth.session_tokens (
  token_hash text PRIMARY KEY,
  family_id uuid NOT NULL,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  rotated_at timestamptz
);
CREATE INDEX IF NOT EXISTS session_tokens_account_id_idx ON auth.session_tokens (account_id);
CREATE INDEX IF NOT EXISTS session_tokens_family_id_idx ON auth.session_tokens (family_id);
CREATE INDEX IF NOT EXISTS session_tokens_expires_at_idx ON auth.session_tokens (expires_at);

-- HBP's plain refresh tokens keep working until they expire: carried over as hashes of their text.
INSERT INTO auth.session_tokens (token_hash, family_id, account_id, created_at, expires_at)
  SELECT encode(sha256(convert_to(refresh_token::text, 'UTF8')), 'hex'), gen_random_uuid(), account_id, created_at, expires_at
  FROM auth.refresh_tokens
  WHERE expires_at > now()
ON CONFLICT DO NOTHING;
DELETE FROM auth.refresh_tokens;

-- Single-use tickets, typed by purpose, stored hashed. `payload` carries what the purpose needs
-- (for instance the new address of an email change).
CREATE TABLE IF NOT EXISTS auth.tickets (
  ticket_hash text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  purpose text NOT NULL CHECK (purpose IN ('activation', 'magic-link', 'password-reset', 'email-change', 'mfa-login')),
  payload jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  failed_attempts integer NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tickets_account_purpose_idx ON auth.tickets (account_id, purpose);
