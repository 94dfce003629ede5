-- Email one-time codes (EMAIL_OTP_ENABLED, src/auth/flows/email-otp.ts) are tickets of a new purpose,
-- 'email-otp': single use, per account, stored hashed, with the failed-attempt count tickets already have.
-- The code is six digits, so `ticket_hash` is the SHA-256 of a random salt (kept in `payload`) and the
-- code: unique like every ticket's, and no table of the million codes' hashes matches it.
ALTER TABLE auth.tickets DROP CONSTRAINT IF EXISTS tickets_purpose_check;
ALTER TABLE auth.tickets ADD CONSTRAINT tickets_purpose_check
  CHECK (purpose IN ('activation', 'magic-link', 'password-reset', 'email-change', 'mfa-login', 'email-otp'));
