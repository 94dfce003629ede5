-- TOTP state. HBP's columns keep their meaning for Hasura clients: auth.accounts.otp_secret holds the
-- active secret (now encrypted, `gh1:…`) and auth.accounts.mfa_enabled the flag. The rest lives here.
CREATE TABLE IF NOT EXISTS auth.account_mfa (
  account_id uuid PRIMARY KEY REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  -- Encrypted secret from /auth/mfa/generate; it becomes the active secret only on /auth/mfa/enable.
  pending_secret text,
  pending_created_at timestamptz,
  -- The last TOTP time step accepted for the account: codes of that step or earlier are refused (replay).
  last_used_step bigint,
  -- Wrong codes in the current window (per-account limit on guessing).
  failed_codes integer NOT NULL DEFAULT 0,
  failed_window_start timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
