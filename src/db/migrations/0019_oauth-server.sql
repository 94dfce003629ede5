-- Gatehouse as an OAuth 2.1 authorization server (MCP clients, third-party apps): the clients an operator
-- (or RFC 7591 registration) made, the consents people gave, authorization codes, and the token families
-- (one per code exchange) with their refresh tokens. Codes, secrets and refresh tokens are stored only as
-- SHA-256 hashes. Clients identified by a metadata document URL (CIMD) are not stored: they are fetched.
CREATE TABLE IF NOT EXISTS auth.oauth_clients (
  id text PRIMARY KEY,
  -- NULL for a public client (token_endpoint_auth_method "none").
  secret_hash text,
  name text NOT NULL,
  redirect_uris text[] NOT NULL,
  logo_uri text,
  -- "operator" (gatehouse oauth-clients create) or "registration" (POST /auth/oauth2/register).
  origin text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- What a person allowed a client: covers later requests for these scopes and resources or fewer.
CREATE TABLE IF NOT EXISTS auth.oauth_consents (
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  client_id text NOT NULL,
  client_name text NOT NULL,
  scopes text[] NOT NULL,
  resources text[] NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, client_id)
);

-- One authorization code, single use. `family_id` is the token family its exchange starts, so a code
-- presented twice can end every token issued from it.
CREATE TABLE IF NOT EXISTS auth.oauth_codes (
  code_hash text PRIMARY KEY,
  family_id uuid NOT NULL,
  client_id text NOT NULL,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  session_id uuid NOT NULL,
  redirect_uri text NOT NULL,
  code_challenge text NOT NULL,
  scopes text[] NOT NULL,
  resources text[] NOT NULL,
  nonce text,
  auth_time timestamptz,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX IF NOT EXISTS oauth_codes_expires_at_idx ON auth.oauth_codes (expires_at);

-- The tokens issued from one code: its id is the `grant_id` claim of every access token of the family
-- (what the revoked list names), and the refresh tokens rotate within it.
CREATE TABLE IF NOT EXISTS auth.oauth_token_families (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  client_id text NOT NULL,
  -- The sign-in (auth.sessions) the grant was given in: ending it ends the family.
  session_id uuid NOT NULL REFERENCES auth.sessions (id) ON DELETE CASCADE,
  scopes text[] NOT NULL,
  resources text[] NOT NULL,
  auth_time timestamptz,
  created_at timestamptz NOT NULL,
  last_used_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS oauth_token_families_account_idx ON auth.oauth_token_families (account_id, client_id);
CREATE INDEX IF NOT EXISTS oauth_token_families_session_idx ON auth.oauth_token_families (session_id);

CREATE TABLE IF NOT EXISTS auth.oauth_refresh_tokens (
  token_hash text PRIMARY KEY,
  family_id uuid NOT NULL REFERENCES auth.oauth_token_families (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  rotated_at timestamptz
);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_family_idx ON auth.oauth_refresh_tokens (family_id);
