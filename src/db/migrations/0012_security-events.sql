-- The security feed: what happened to an account that its owner should be able to see (sign-ins, failed
-- guesses, sessions ended, password, email and MFA changes, providers linked). One row per event, written
-- in the transaction of the change it reports (src/events). No secret is ever stored here: no password,
-- token, code or link, only what happened, when, and from which client. Rows older than
-- SECURITY_EVENTS_RETENTION_DAYS are deleted by the service; deleting an account deletes its feed.
CREATE TABLE IF NOT EXISTS auth.security_events (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  type text NOT NULL,
  created_at timestamptz NOT NULL,
  ip text,
  user_agent text,
  -- The session the action came from (or, for a sign-in, the session it began); not a foreign key: the
  -- session may end while its events are kept.
  session_id uuid,
  details jsonb NOT NULL DEFAULT '{}'::jsonb
);
-- The feed is read newest first per account, paged by (created_at, id).
CREATE INDEX IF NOT EXISTS security_events_account_idx
  ON auth.security_events (account_id, created_at DESC, id DESC);
-- Retention deletes by age across all accounts.
CREATE INDEX IF NOT EXISTS security_events_created_at_idx ON auth.security_events (created_at);
