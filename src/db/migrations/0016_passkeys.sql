-- Passkeys (WebAuthn credentials, issue 29). A credential id is unique across every account: the same
-- authenticator key can never open two accounts, and registering it twice is refused. The public key
-- (COSE, as the authenticator gave it) never leaves the server. `counter` is the authenticator's
-- signature counter: a sign-in whose counter does not move forward (when either is non-zero) comes from
-- a cloned key and is refused. `user_handle` is the WebAuthn user.id the credential was created for
-- (base64url), compared with the one a discoverable sign-in returns.
--
-- A passkey made by a sign-up that waits for activation belongs to its registration attempt
-- (`attempt_id`), not yet to the account: it signs nothing in, and it is given to the account only when
-- that attempt's own link activates it alone (src/auth/flows/registration.ts); otherwise it goes with
-- the attempt.
CREATE TABLE IF NOT EXISTS auth.passkeys (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  attempt_id uuid REFERENCES auth.registration_attempts (id) ON DELETE CASCADE,
  credential_id text NOT NULL,
  public_key bytea NOT NULL,
  counter bigint NOT NULL DEFAULT 0 CHECK (counter >= 0),
  transports text[] NOT NULL DEFAULT '{}',
  backed_up boolean NOT NULL DEFAULT false,
  user_handle text NOT NULL,
  name text NOT NULL,
  created_at timestamptz NOT NULL,
  last_used_at timestamptz,
  CONSTRAINT passkeys_credential_id_key UNIQUE (credential_id)
);
CREATE INDEX IF NOT EXISTS passkeys_account_id_idx ON auth.passkeys (account_id);
CREATE INDEX IF NOT EXISTS passkeys_attempt_id_idx ON auth.passkeys (attempt_id);

-- A WebAuthn challenge waiting for its answer: stored as the SHA-256 of the challenge (a leaked table
-- holds nothing an attacker can answer), bound to its ceremony (`kind`) and, for registration and
-- step-up, to the account; a sign-up's choices wait here too. Single use: the verify step deletes the
-- row it reads in the same statement (DELETE … RETURNING). Lives 5 minutes.
CREATE TABLE IF NOT EXISTS auth.passkey_challenges (
  id text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('register', 'login', 'signup', 'reauthenticate')),
  account_id uuid REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  user_handle text,
  signup jsonb,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS passkey_challenges_expires_at_idx ON auth.passkey_challenges (expires_at);

-- A sign-up with a passkey that waits for activation is a registration attempt of its own kind.
ALTER TABLE auth.registration_attempts DROP CONSTRAINT IF EXISTS registration_attempts_kind_check;
ALTER TABLE auth.registration_attempts ADD CONSTRAINT registration_attempts_kind_check
  CHECK (kind IN ('password', 'passwordless', 'passkey', 'resend'));
