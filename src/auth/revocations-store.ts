/**
 * Access tokens refused before their expiry (auth.revocations): an ended session's (`session_id`), or every
 * token of a user issued up to an instant (`user_id` + `issued_before`: an account disabled or deleted).
 * A row is written in the transaction that ends the session and announced with NOTIFY on commit, so every
 * instance hears it at once; it is needed only until every access token it can refuse has expired.
 */
import type { Queryable } from '../db/database.ts';

/** The NOTIFY channel every instance listens on. */
export const REVOCATIONS_CHANNEL = 'gatehouse_revocations';

/** One revocation, as stored, sent in a notification and held in memory (instants in milliseconds). */
export interface Revocation {
  /** Every access token naming this session. */
  sessionIds?: string[];
  /** With `issuedBefore`: every access token of this user issued at or before that instant. */
  userId?: string;
  issuedBefore?: number;
  /** When the entry may be forgotten: every token it refuses has expired by then. */
  expiresAt: number;
  /** When it was made (notifications carry it, to measure how late they arrive). */
  at?: number;
}

/** Session ids per notification: a NOTIFY payload holds at most 8000 bytes. */
const IDS_PER_NOTICE = 100;

/** Stores a revocation and announces it; the notifications go out when `db`'s transaction commits. */
export async function insertRevocation(db: Queryable, r: Revocation, now: Date): Promise<void> {
  const ids = r.sessionIds ?? [];
  const expires = new Date(r.expiresAt);
  if (ids.length > 0) {
    await db.query(
      'InsertSessionRevocations',
      `INSERT INTO auth.revocations (session_id, created_at, expires_at)
       SELECT unnest($1::uuid[]), $2, $3`,
      [ids, now, expires],
    );
    for (let i = 0; i < ids.length; i += IDS_PER_NOTICE) {
      await notify(db, { sessionIds: ids.slice(i, i + IDS_PER_NOTICE), expiresAt: r.expiresAt, at: r.at });
    }
  }
  if (r.userId !== undefined && r.issuedBefore !== undefined) {
    await db.query(
      'InsertUserRevocation',
      `INSERT INTO auth.revocations (user_id, issued_before, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
      [r.userId, new Date(r.issuedBefore), now, expires],
    );
    await notify(db, { userId: r.userId, issuedBefore: r.issuedBefore, expiresAt: r.expiresAt, at: r.at });
  }
}

async function notify(db: Queryable, r: Revocation): Promise<void> {
  await db.query('NotifyRevocation', 'SELECT pg_notify($1, $2)', [REVOCATIONS_CHANNEL, JSON.stringify(r)]);
}

/** A heartbeat on the channel: the instance that sends it expects to hear it back. */
export async function notifyHeartbeat(db: Queryable, nonce: string): Promise<void> {
  await db.query('NotifyRevocationHeartbeat', 'SELECT pg_notify($1, $2)', [
    REVOCATIONS_CHANNEL,
    JSON.stringify({ ping: nonce }),
  ]);
}

/** The nonce of a heartbeat payload, or undefined when the payload is not one. */
export function heartbeatNonce(payload: string): string | undefined {
  if (!payload.startsWith('{"ping":')) return undefined;
  try {
    const v = JSON.parse(payload) as { ping?: unknown };
    return typeof v.ping === 'string' ? v.ping : undefined;
  } catch {
    return undefined;
  }
}

/** Every revocation still in force at `now`. */
export async function loadRevocations(db: Queryable, now: Date): Promise<Revocation[]> {
  const { rows } = await db.query<{
    session_id: string | null;
    user_id: string | null;
    issued_before: Date | null;
    expires_at: Date;
  }>(
    'LoadRevocations',
    'SELECT session_id, user_id, issued_before, expires_at FROM auth.revocations WHERE expires_at > $1',
    [now],
  );
  return rows.map((row) => {
    const expiresAt = new Date(row.expires_at).getTime();
    return row.session_id !== null
      ? { sessionIds: [row.session_id], expiresAt }
      : {
          userId: row.user_id as string,
          issuedBefore: new Date(row.issued_before as Date).getTime(),
          expiresAt,
        };
  });
}

/** Drops the revocations no token can need any more. */
export async function purgeRevocations(db: Queryable, now: Date): Promise<number> {
  const { rowCount } = await db.query(
    'PurgeRevocations',
    'DELETE FROM auth.revocations WHERE expires_at <= $1',
    [now],
  );
  return rowCount;
}

/** Whether a token (its session, user and issue instant) is revoked: the check while the list is not trusted. */
export async function isRevoked(
  db: Queryable,
  token: { sessionId: string | undefined; userId: string; issuedAt: Date },
  now: Date,
): Promise<boolean> {
  const { rows } = await db.query(
    'IsTokenRevoked',
    `SELECT 1 FROM auth.revocations
      WHERE expires_at > $4
        AND (session_id = $1::uuid OR (user_id = $2::uuid AND issued_before >= $3))
      LIMIT 1`,
    [token.sessionId ?? null, token.userId, token.issuedAt, now],
  );
  return rows.length > 0;
}

/** A notification's payload as a revocation, or undefined when it is not one. */
export function parseRevocation(payload: string): Revocation | undefined {
  try {
    const v = JSON.parse(payload) as Revocation;
    if (typeof v?.expiresAt !== 'number') return undefined;
    return v;
  } catch {
    return undefined;
  }
}
