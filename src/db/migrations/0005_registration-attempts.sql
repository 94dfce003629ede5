-- Registration attempts. While an account waits for activation, what each registration request chose
-- (password hash, roles, default role, user fields, locale) lives here, not on the account: the account
-- row keeps no password and the default roles, so nobody's choice reaches the account until a link of that
-- very attempt, followed from the mailbox, proves the address. A resend of the link is an attempt that
-- chose nothing (kind 'resend'). `expires_at` is the expiry of the attempt's link: an activation keeps its
-- attempt's choices only when no other attempt's link was live beside it (see src/auth/registration.ts).
CREATE TABLE IF NOT EXISTS auth.registration_attempts (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('password', 'passwordless', 'resend')),
  password_hash text,
  default_role text,
  roles text[],
  user_data jsonb,
  locale text CHECK (locale ~ '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$'),
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS registration_attempts_account_idx
  ON auth.registration_attempts (account_id, created_at);
