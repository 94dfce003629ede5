/**
 * auth.security_events: the owner's security feed (migration 0012). Rows are written by recordEvent inside
 * the change's transaction and read newest first, paged by (created_at, id).
 */
import type { Queryable } from '../db/database.ts';

export interface NewSecurityEvent {
  id: string;
  accountId: string;
  type: string;
  createdAt: Date;
  ip: string | null;
  userAgent: string | null;
  sessionId: string | null;
  details: Record<string, unknown>;
  /**
   * Milliseconds: the row is written only when the account has no event of this type newer than this
   * (a flood of failed guesses keeps one row a minute). Undefined: always written.
   */
  atMostOneWithinMs?: number;
}

export interface SecurityEventRow {
  id: string;
  type: string;
  created_at: Date;
  ip: string | null;
  user_agent: string | null;
  session_id: string | null;
  details: Record<string, unknown>;
}

/**
 * Stores an event. The account is selected rather than assumed, so an event for an account that does not
 * exist (a wrong password for an unknown address: the caller passes a made-up id) costs the same round
 * trip and writes nothing: the two cases are not told apart by timing.
 */
export async function insertSecurityEvent(db: Queryable, e: NewSecurityEvent): Promise<boolean> {
  const within = e.atMostOneWithinMs;
  const { rowCount } = await db.query(
    'InsertSecurityEvent',
    `INSERT INTO auth.security_events (id, account_id, type, created_at, ip, user_agent, session_id, details)
     SELECT $1, a.id, $3, $4, $5, $6, $7, $8::jsonb FROM auth.accounts a
      WHERE a.id = $2
        AND ($9::bigint IS NULL OR NOT EXISTS (
          SELECT 1 FROM auth.security_events s
           WHERE s.account_id = a.id AND s.type = $3
             AND s.created_at > $4::timestamptz - make_interval(secs => $9::bigint / 1000.0)))`,
    [
      e.id,
      e.accountId,
      e.type,
      e.createdAt,
      e.ip,
      e.userAgent,
      e.sessionId,
      JSON.stringify(e.details),
      within ?? null,
    ],
  );
  return rowCount > 0;
}

/** Where a page starts: strictly older than this event (newest first). */
export interface FeedCursor {
  createdAt: Date;
  id: string;
}

/** The account's event `id` as a cursor, or undefined when the account has no such event. */
export async function findEventCursor(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<FeedCursor | undefined> {
  const { rows } = await db.query<{ id: string; created_at: Date }>(
    'FindSecurityEventCursor',
    'SELECT id, created_at FROM auth.security_events WHERE account_id = $1 AND id = $2',
    [accountId, id],
  );
  const row = rows[0];
  return row ? { id: row.id, createdAt: new Date(row.created_at) } : undefined;
}

/** A page of the account's events, newest first, strictly older than `before` when given. */
export async function listSecurityEvents(
  db: Queryable,
  accountId: string,
  limit: number,
  before?: FeedCursor,
): Promise<SecurityEventRow[]> {
  const { rows } = await db.query<SecurityEventRow>(
    'ListSecurityEvents',
    `SELECT id, type, created_at, ip, user_agent, session_id, details FROM auth.security_events
      WHERE account_id = $1
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, id DESC
      LIMIT $2`,
    [accountId, limit, before?.createdAt ?? null, before?.id ?? null],
  );
  return rows.map((r) => ({
    ...r,
    created_at: new Date(r.created_at),
    details: typeof r.details === 'string' ? (JSON.parse(r.details) as Record<string, unknown>) : r.details,
  }));
}

/** Deletes the events created before `before` (retention); how many went. */
export async function pruneSecurityEvents(db: Queryable, before: Date): Promise<number> {
  const { rowCount } = await db.query(
    'PruneSecurityEvents',
    'DELETE FROM auth.security_events WHERE created_at < $1',
    [before],
  );
  return rowCount;
}
