-- The durable email outbox (src/mail/outbox.ts). A flow writes its email here in the same transaction as
-- the ticket or account it is about; a sender in every instance delivers it after the commit, retrying
-- with growing delays, so a link always works the moment its email arrives and an SMTP outage delays
-- emails instead of failing requests.
--
-- kind 'email': a message to render (`template`, `recipient`, and `message` = {locals, headers}). Any
-- other kind is a deferred step of a flow that must answer before it looks the address up (lost password,
-- activation resend, magic-link login): `message` holds its input, and the step, run once by one sender,
-- queues its email in the transaction that removes the step.
--
-- `message` carries the link, and so its ticket, in clear: it is erased (NULL) once the email is sent or
-- given up, and sent rows are deleted after EMAIL_SENT_RETENTION_HOURS. A sender claims a row by setting
-- `claimed_by` and a lease (`claimed_until`); rows whose lease ran out (a sender that died) are claimed
-- again. `attempts` counts claims, so a message that keeps killing its sender still ends.
CREATE TABLE IF NOT EXISTS auth.email_outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL DEFAULT 'email',
  template text,
  recipient text,
  message jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- The link's expiry: an email still unsent then is given up (its link would not work).
  expires_at timestamptz,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  claimed_by text,
  claimed_until timestamptz,
  sent_at timestamptz,
  failed_at timestamptz,
  last_error text,
  CHECK (kind <> 'email' OR (template IS NOT NULL AND recipient IS NOT NULL))
);
-- What the senders look for: rows neither sent nor given up, by due time.
CREATE INDEX IF NOT EXISTS email_outbox_due_idx
  ON auth.email_outbox (next_attempt_at)
  WHERE sent_at IS NULL AND failed_at IS NULL;
-- Pruning of sent and given-up rows.
CREATE INDEX IF NOT EXISTS email_outbox_sent_idx ON auth.email_outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS email_outbox_failed_idx ON auth.email_outbox (failed_at) WHERE failed_at IS NOT NULL;
