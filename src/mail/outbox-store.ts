/**
 * The SQL of the email outbox (table auth.email_outbox, migration 0008). Times are the database's
 * (`now()`), so that instances whose clocks differ agree on leases and due times.
 */
import type { Queryable } from '../db/database.ts';

export interface OutboxRow {
  id: string;
  /** 'email', or a deferred step (port.ts). */
  kind: string;
  template: string | null;
  recipient: string | null;
  message: Record<string, unknown> | null;
  /** Claims so far, this one included. */
  attempts: number;
  /** The link expired before this claim. */
  expired: boolean;
  /** A webhook's `webhook-id`, the same on every attempt (null for emails). */
  delivery_id: string | null;
}

export async function insertOutboxRow(
  db: Queryable,
  row: {
    kind: string;
    template?: string;
    recipient?: string;
    message: Record<string, unknown>;
    expiresAt?: Date;
    /** A webhook's `webhook-id`. */
    deliveryId?: string;
    /** Rows with the same key and recipient are delivered one after the other, in insertion order. */
    orderingKey?: string | null;
  },
): Promise<void> {
  await db.query(
    'InsertOutboxRow',
    `INSERT INTO auth.email_outbox (kind, template, recipient, message, expires_at, delivery_id, ordering_key)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)`,
    [
      row.kind,
      row.template ?? null,
      row.recipient ?? null,
      JSON.stringify(row.message),
      row.expiresAt ?? null,
      row.deliveryId ?? null,
      row.orderingKey ?? null,
    ],
  );
}

/**
 * Claims up to `limit` due rows for `sender` for `leaseMs` (renewed by `renewLeases` while it works): rows neither sent nor given up, due, and not
 * held by a live lease. SKIP LOCKED lets senders of several instances claim at the same moment without
 * waiting on, or taking, each other's rows. Each claim counts as an attempt.
 */
export async function claimDueRows(
  db: Queryable,
  sender: string,
  leaseMs: number,
  limit: number,
): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow & { id: string | number }>(
    'ClaimOutboxRows',
    `UPDATE auth.email_outbox o
        SET claimed_by = $1, claimed_until = now() + $2 * interval '1 millisecond', attempts = o.attempts + 1
      WHERE o.id IN (
        SELECT id FROM auth.email_outbox d
         WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
           AND (claimed_until IS NULL OR claimed_until < now())
           -- In order per key and recipient: not while an earlier row of theirs waits (or is under way).
           AND (d.ordering_key IS NULL OR NOT EXISTS (
                 SELECT 1 FROM auth.email_outbox e
                  WHERE e.ordering_key = d.ordering_key AND e.recipient = d.recipient AND e.id < d.id
                    AND e.sent_at IS NULL AND e.failed_at IS NULL))
         ORDER BY next_attempt_at, id
         LIMIT $3
         FOR UPDATE SKIP LOCKED)
      RETURNING o.id, o.kind, o.template, o.recipient, o.message, o.attempts, o.delivery_id,
                (o.expires_at IS NOT NULL AND o.expires_at <= now()) AS expired`,
    [sender, leaseMs, limit],
  );
  return rows.map((r) => ({ ...r, id: String(r.id) }));
}

/**
 * Extends the lease of every row `sender` still holds (its heartbeat while deliveries run): leases stay
 * short, so that the rows of a sender that died are free again soon, yet never run out under a live one.
 */
export async function renewLeases(db: Queryable, sender: string, leaseMs: number): Promise<number> {
  const { rowCount } = await db.query(
    'RenewOutboxLeases',
    `UPDATE auth.email_outbox
        SET claimed_until = now() + $2 * interval '1 millisecond'
      WHERE claimed_by = $1 AND sent_at IS NULL AND failed_at IS NULL`,
    [sender, leaseMs],
  );
  return rowCount;
}

/**
 * Gives back a row `sender` claimed but never handed to the transport (the service is stopping): free at
 * once for the next start or another instance, still due, and its claim not counted as an attempt.
 */
export async function releaseRow(db: Queryable, id: string, sender: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'ReleaseOutboxRow',
    `UPDATE auth.email_outbox
        SET claimed_by = NULL, claimed_until = NULL, attempts = greatest(attempts - 1, 0)
      WHERE id = $1 AND claimed_by = $2 AND sent_at IS NULL AND failed_at IS NULL`,
    [id, sender],
  );
  return rowCount > 0;
}

/** Records a delivery and erases the message (its link). False when `sender` no longer held the row. */
export async function markSent(db: Queryable, id: string, sender: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'MarkOutboxRowSent',
    `UPDATE auth.email_outbox
        SET sent_at = now(), message = NULL, claimed_by = NULL, claimed_until = NULL, last_error = NULL
      WHERE id = $1 AND claimed_by = $2 AND sent_at IS NULL`,
    [id, sender],
  );
  return rowCount > 0;
}

/** Schedules the next attempt after `delayMs`, with what went wrong. */
export async function markRetry(
  db: Queryable,
  id: string,
  sender: string,
  delayMs: number,
  error: string,
): Promise<void> {
  await db.query(
    'MarkOutboxRowRetry',
    `UPDATE auth.email_outbox
        SET next_attempt_at = now() + $3 * interval '1 millisecond', claimed_by = NULL, claimed_until = NULL,
            last_error = $4
      WHERE id = $1 AND claimed_by = $2`,
    [id, sender, delayMs, error],
  );
}

/** Gives the row up for good: kept with its error, its message (and link) erased. */
export async function markFailed(db: Queryable, id: string, sender: string, error: string): Promise<void> {
  await db.query(
    'MarkOutboxRowFailed',
    `UPDATE auth.email_outbox
        SET failed_at = now(), message = NULL, claimed_by = NULL, claimed_until = NULL, last_error = $3
      WHERE id = $1 AND claimed_by = $2`,
    [id, sender, error],
  );
}

/** Removes a deferred step that `sender` still holds; false when it no longer does (another took it). */
export async function takeStep(tx: Queryable, id: string, sender: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    'TakeOutboxStep',
    'DELETE FROM auth.email_outbox WHERE id = $1 AND claimed_by = $2',
    [id, sender],
  );
  return rowCount > 0;
}

/** Deletes sent rows older than `sentHours` and given-up rows older than `failedHours`. */
export async function pruneOutbox(db: Queryable, sentHours: number, failedHours: number): Promise<number> {
  const sent = await db.query(
    'PruneSentOutboxRows',
    `DELETE FROM auth.email_outbox WHERE sent_at < now() - $1 * interval '1 hour'`,
    [sentHours],
  );
  const failed = await db.query(
    'PruneFailedOutboxRows',
    `DELETE FROM auth.email_outbox WHERE failed_at < now() - $1 * interval '1 hour'`,
    [failedHours],
  );
  return sent.rowCount + failed.rowCount;
}

export interface OutboxBacklog {
  /** Emails waiting to be sent (due or not), steps included. */
  pending: number;
  /** Seconds the oldest of them has waited; 0 when none. */
  oldestSeconds: number;
  /** Emails given up and still kept. */
  failed: number;
  /** Webhook deliveries waiting, and given up and still kept. */
  webhooksPending: number;
  webhooksFailed: number;
}

/** The backlog, for metrics. */
export async function outboxBacklog(db: Queryable): Promise<OutboxBacklog> {
  const { rows } = await db.query<{
    pending: number;
    oldest: number | null;
    failed: number;
    webhooks_pending: number;
    webhooks_failed: number;
  }>(
    'OutboxBacklog',
    `SELECT count(*) FILTER (WHERE kind <> 'webhook' AND sent_at IS NULL AND failed_at IS NULL)::int AS pending,
            extract(epoch FROM now() - min(created_at) FILTER (WHERE kind <> 'webhook' AND sent_at IS NULL AND failed_at IS NULL))::float8 AS oldest,
            count(*) FILTER (WHERE kind <> 'webhook' AND failed_at IS NOT NULL)::int AS failed,
            count(*) FILTER (WHERE kind = 'webhook' AND sent_at IS NULL AND failed_at IS NULL)::int AS webhooks_pending,
            count(*) FILTER (WHERE kind = 'webhook' AND failed_at IS NOT NULL)::int AS webhooks_failed
       FROM auth.email_outbox`,
  );
  const r = rows[0];
  return {
    pending: r?.pending ?? 0,
    oldestSeconds: Math.max(0, r?.oldest ?? 0),
    failed: r?.failed ?? 0,
    webhooksPending: r?.webhooks_pending ?? 0,
    webhooksFailed: r?.webhooks_failed ?? 0,
  };
}

/** A row given up, as `gatehouse webhooks list-failed` shows it. */
export interface FailedRow {
  id: string;
  delivery_id: string | null;
  template: string | null;
  recipient: string | null;
  attempts: number;
  created_at: Date;
  failed_at: Date;
  last_error: string | null;
}

/** Rows of `kind` given up and still kept, newest first. */
export async function listFailedRows(db: Queryable, kind: string, limit: number): Promise<FailedRow[]> {
  const { rows } = await db.query<FailedRow & { id: string | number }>(
    'ListFailedOutboxRows',
    `SELECT id, delivery_id, template, recipient, attempts, created_at, failed_at, last_error
       FROM auth.email_outbox WHERE kind = $1 AND failed_at IS NOT NULL
      ORDER BY failed_at DESC, id DESC LIMIT $2`,
    [kind, limit],
  );
  return rows.map((r) => ({
    ...r,
    id: String(r.id),
    created_at: new Date(r.created_at),
    failed_at: new Date(r.failed_at),
  }));
}

/** One email of the outbox as an operator sees it: where it stands, never what it carries (its link). */
export interface OutboxListing {
  id: string;
  template: string;
  recipient: string;
  created_at: Date;
  attempts: number;
  sent_at: Date | null;
  failed_at: Date | null;
  last_error: string | null;
}

/** The newest `limit` emails of the outbox (deferred steps left out: they name no recipient yet). */
export async function listOutboxEmails(db: Queryable, limit: number): Promise<OutboxListing[]> {
  const { rows } = await db.query<OutboxListing>(
    'ListOutboxEmails',
    `SELECT id::text AS id, template, recipient, created_at, attempts, sent_at, failed_at, last_error
       FROM auth.email_outbox WHERE kind = 'email'
      ORDER BY created_at DESC, id DESC LIMIT $1`,
    [limit],
  );
  const date = (d: Date | string | null) => (d === null ? null : new Date(d));
  return rows.map((r) => ({
    ...r,
    created_at: new Date(r.created_at),
    sent_at: date(r.sent_at),
    failed_at: date(r.failed_at),
  }));
}
