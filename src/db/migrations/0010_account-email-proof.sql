-- Whether, when and how the account's current address was proven to belong to whoever holds the account.
-- A provider identity is linked to an account by its email only when that account's address is proven
-- (src/auth/flows/oauth.ts): an address anyone typed into a registration form, or moved their account to
-- without confirming it (VERIFY_EMAILS=false), must not hand its real owner's provider sign-in to them.
-- NULL: not proven. `email_verified_by` says what proved it: activation, magic-link, password-reset,
-- email-change (each a link mailed to that address and followed), provider:<name> (a provider that
-- vouched for it when the account was made), operator (gatehouse users create).
--
-- Rows from before this migration are not proven: neither HBP's columns nor earlier Gatehouse ones record
-- how an active account became active (see docs/migrating-from-hbp.md). Nobody is locked out by that:
-- each keeps their way to sign in, and the first emailed link they follow records the proof.
ALTER TABLE auth.accounts ADD COLUMN IF NOT EXISTS email_verified_at timestamptz;
ALTER TABLE auth.accounts ADD COLUMN IF NOT EXISTS email_verified_by text;

-- A proof belongs to an address: any write that changes the address (Gatehouse's direct change, an
-- application's UPDATE through Hasura) forgets it; a confirmed change records the new proof afterwards.
-- citext compares case-insensitively, so the same address in another case keeps its proof.
CREATE OR REPLACE FUNCTION auth.forget_email_proof() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.email IS DISTINCT FROM OLD.email THEN
    NEW.email_verified_at := NULL;
    NEW.email_verified_by := NULL;
  END IF;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS forget_email_proof ON auth.accounts;
CREATE TRIGGER forget_email_proof BEFORE UPDATE OF email ON auth.accounts
  FOR EACH ROW EXECUTE FUNCTION auth.forget_email_proof();
