-- The instant of the sign-in (password, magic link, MFA, activation…) a session token descends from.
-- Every token of a family carries its family's value, copied on each rotation, so that the access tokens
-- issued on refresh repeat it as `auth_time` and a refresh never makes a sign-in look recent. Tokens
-- stored before this column existed keep NULL: their sessions count as signed in long ago.
ALTER TABLE auth.session_tokens ADD COLUMN IF NOT EXISTS signed_in_at timestamptz;
