-- Sign-in with OAuth and OpenID Connect providers. HBP's auth.account_providers (one row per linked
-- identity, unique per (provider, subject) and per (account, provider)) is used as it is; the generic
-- OpenID Connect provider joins HBP's eight in auth.providers.
INSERT INTO auth.providers (provider) VALUES ('oidc') ON CONFLICT DO NOTHING;

-- Provider sign-ins in progress, one row per start. `state_hash` is the SHA-256 of the `state` sent to
-- the provider (for OAuth 1.0a, of the request token); `binding_hash` the SHA-256 of the random value in
-- the browser's signed cookie, so that only the browser that started a sign-in can finish it. A row is
-- used once (`used_at`) and lives PROVIDER_STATE_EXPIRES_IN minutes. `link_account_id` is set when a
-- signed-in user links a provider to their own account.
CREATE TABLE IF NOT EXISTS auth.provider_requests (
  state_hash text PRIMARY KEY,
  provider text NOT NULL REFERENCES auth.providers (provider) ON UPDATE CASCADE ON DELETE CASCADE,
  binding_hash text NOT NULL,
  code_verifier text,
  nonce text,
  request_token_secret text,
  redirect_to text,
  use_cookie boolean NOT NULL DEFAULT true,
  link_account_id uuid REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX IF NOT EXISTS provider_requests_expires_at_idx ON auth.provider_requests (expires_at);

-- The provider's tokens of a linked identity (PROVIDER_TOKENS_STORED), sealed with the key that seals
-- TOTP secrets; kept apart from auth.account_providers, which a GraphQL engine may expose.
CREATE TABLE IF NOT EXISTS auth.account_provider_tokens (
  account_provider_id uuid PRIMARY KEY REFERENCES auth.account_providers (id) ON UPDATE CASCADE ON DELETE CASCADE,
  sealed_tokens text NOT NULL,
  expires_at timestamptz,
  updated_at timestamptz NOT NULL
);
