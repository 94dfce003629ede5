-- Webhook deliveries (src/webhooks/) ride the durable outbox of 0008: one sender, one claim/lease/backoff
-- mechanism, a deliverer per kind. A delivery is a row of kind 'webhook' written in the transaction of the
-- change it reports (so a rolled-back change sends nothing), one row per receiver: `template` holds the
-- event type, `recipient` the receiver's URL, `message` the body as signed ({type, timestamp, data}; ids
-- and non-secret fields only).
--
-- `delivery_id` is the Standard Webhooks `webhook-id`: the same on every retry, so a receiver can drop
-- the duplicates that at-least-once delivery allows. `ordering_key` (the account) keeps an account's
-- deliveries to one receiver in order: a row is not claimed while an earlier one with the same key and
-- receiver is neither sent nor given up.
ALTER TABLE auth.email_outbox ADD COLUMN IF NOT EXISTS delivery_id text;
ALTER TABLE auth.email_outbox ADD COLUMN IF NOT EXISTS ordering_key text;
-- What the claim's "an earlier one is waiting" test looks up.
CREATE INDEX IF NOT EXISTS email_outbox_ordering_idx
  ON auth.email_outbox (ordering_key, recipient, id)
  WHERE ordering_key IS NOT NULL AND sent_at IS NULL AND failed_at IS NULL;
-- `gatehouse webhooks list-failed` and the metrics.
CREATE INDEX IF NOT EXISTS email_outbox_kind_failed_idx
  ON auth.email_outbox (kind, failed_at) WHERE failed_at IS NOT NULL;
