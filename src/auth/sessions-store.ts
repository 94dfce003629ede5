/**
 * Sessions (auth.sessions) and their refresh tokens (auth.session_tokens), kept only as SHA-256 digests.
 * Tokens rotated from one another share a family (one sign-in, one auth.sessions row whose id is the
 * family id and every access token's `sid`) and its sign-in instant (`signed_in_at`); a rotated token
 * keeps its row, marked `rotated_at`, so that reuse can be recognised. Deleting a session deletes its
 * tokens (foreign key, on delete cascade).
 */
import type { Queryable } from '../db/database.ts';
import type { NewSecurityEvent } from '../events/events-store.ts';

/**
 * The account a token was being stored for no longer exists: it was deleted while it signed in or
 * refreshed. (The statements lock the account row first, so the foreign key never has to refuse one.)
 */
export class AccountGone extends Error {
  override name = 'AccountGone';
}

export interface SessionTokenRow {
  token_hash: string;
  family_id: string;
  account_id: string;
  created_at: Date;
  expires_at: Date;
  rotated_at: Date | null;
  /** When the family's sign-in happened; null for tokens stored before it was recorded. */
  signed_in_at: Date | null;
}

/** How and from where a session began, as GET /auth/sessions shows it. */
export interface SessionOrigin {
  /** password, magic-link, mfa, oauth:<provider>, passkey, anonymous… (null: not said) */
  method: string | null;
  userAgent?: string | null;
  ip?: string | null;
}

/**
 * A token row to store. `signedInAt` is its family's sign-in instant (null: unknown); `origin` describes
 * a session that this token starts (ignored when the session exists).
 */
export interface NewSessionToken {
  tokenHash: string;
  familyId: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  signedInAt: Date | null;
  origin?: SessionOrigin;
}

/** A session as its owner sees it. */
export interface SessionRow {
  id: string;
  created_at: Date;
  last_active_at: Date;
  expires_at: Date;
  sign_in_method: string | null;
  user_agent: string | null;
  ip: string | null;
}

/**
 * Stores a new token, with its session row when the token starts a session (the row of an existing one
 * is marked active now), and, in the same statement, drops the account's expired tokens and sessions
 * (housekeeping HBP never did): one round trip on every sign-in. The expired rows are those with
 * `expires_at <= createdAt`. Throws AccountGone when the account no longer exists.
 *
 * Lock order: the statement takes the account row (FOR KEY SHARE) before it touches any token row, as
 * an account's deletion does (the account, then its tokens by cascade). Locking a token row first and
 * the account second (the foreign-key check of the insert) let a sign-in or refresh racing
 * `POST /auth/delete` deadlock with it on PostgreSQL, and one of the two answered 500.
 */
export async function insertSessionToken(
  db: Queryable,
  row: NewSessionToken,
  event?: NewSecurityEvent,
): Promise<void> {
  // With `event` (a sign-in's feed row, sessions.ts), the same statement writes it, for the same account.
  const eventCte = event
    ? `, event AS (
       INSERT INTO auth.security_events (id, account_id, type, created_at, ip, user_agent, session_id, details)
       SELECT $10, account.id, $11, $12, $13, $14, session.id, $15::jsonb FROM account, session
     )`
    : '';
  const eventParams = event
    ? [event.id, event.type, event.createdAt, event.ip, event.userAgent, JSON.stringify(event.details)]
    : [];
  const { rowCount } = await db.query(
    event ? 'InsertSessionTokenAndEvent' : 'InsertSessionToken',
    `WITH account AS (
       SELECT id FROM auth.accounts WHERE id = $3 FOR KEY SHARE
     ), expired AS (
       DELETE FROM auth.session_tokens WHERE account_id = (SELECT id FROM account) AND expires_at <= $4
     ), ended AS (
       DELETE FROM auth.sessions
        WHERE account_id = (SELECT id FROM account) AND expires_at <= $4 AND id <> $2
     ), session AS (
       INSERT INTO auth.sessions (id, account_id, created_at, last_active_at, expires_at, sign_in_method,
                                  user_agent, ip)
       SELECT $2, account.id, coalesce($6, $4), $4, $5, $7, $8, $9 FROM account
       ON CONFLICT (id) DO UPDATE
         SET last_active_at = EXCLUDED.last_active_at,
             expires_at = greatest(auth.sessions.expires_at, EXCLUDED.expires_at)
       RETURNING id
     )${eventCte}
     INSERT INTO auth.session_tokens (token_hash, family_id, account_id, created_at, expires_at, signed_in_at)
     SELECT $1, session.id, account.id, $4, $5, $6 FROM account, session`,
    [
      row.tokenHash,
      row.familyId,
      row.accountId,
      row.createdAt,
      row.expiresAt,
      row.signedInAt,
      row.origin?.method ?? null,
      row.origin?.userAgent ?? null,
      row.origin?.ip ?? null,
      ...eventParams,
    ],
  );
  if (rowCount === 0) throw new AccountGone();
}

export async function findSessionToken(
  db: Queryable,
  tokenHash: string,
): Promise<SessionTokenRow | undefined> {
  const { rows } = await db.query<SessionTokenRow>(
    'FindSessionToken',
    `SELECT token_hash, family_id, account_id, created_at, expires_at, rotated_at, signed_in_at
       FROM auth.session_tokens WHERE token_hash = $1`,
    [tokenHash],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    ...row,
    created_at: new Date(row.created_at),
    expires_at: new Date(row.expires_at),
    rotated_at: row.rotated_at === null ? null : new Date(row.rotated_at),
    signed_in_at: row.signed_in_at === null ? null : new Date(row.signed_in_at),
  };
}

/**
 * Rotates a token in one statement: marks `presentedHash` rotated, stores its successor `next` and drops
 * the account's expired tokens, and marks the session active now, all or nothing; false (and nothing written) when the presented token was
 * already rotated, by a racing request or earlier, or its account is gone. One round trip where a
 * transaction around an update and an insert takes four. The successor inherits the presented token's
 * `signed_in_at` inside the statement, so a refresh can never move a family's sign-in instant. Locks
 * the account before the token row, as insertSessionToken does (see there why).
 */
export async function rotateSessionToken(
  db: Queryable,
  presentedHash: string,
  next: Omit<NewSessionToken, 'signedInAt'>,
): Promise<boolean> {
  const { rowCount } = await db.query(
    'RotateSessionToken',
    `WITH account AS (
       SELECT id FROM auth.accounts WHERE id = $3 FOR KEY SHARE
     ), rotated AS (
       UPDATE auth.session_tokens SET rotated_at = $4
        WHERE token_hash = $1 AND rotated_at IS NULL AND account_id = (SELECT id FROM account)
       RETURNING signed_in_at
     ), expired AS (
       DELETE FROM auth.session_tokens
        WHERE account_id = $3 AND expires_at <= $4 AND token_hash <> $1 AND EXISTS (SELECT 1 FROM rotated)
     ), touched AS (
       UPDATE auth.sessions SET last_active_at = $4, expires_at = greatest(expires_at, $6)
        WHERE id = $5 AND EXISTS (SELECT 1 FROM rotated)
     )
     INSERT INTO auth.session_tokens (token_hash, family_id, account_id, created_at, expires_at, signed_in_at)
     SELECT $2, $5, $3, $4, $6, rotated.signed_in_at FROM rotated`,
    [presentedHash, next.tokenHash, next.accountId, next.createdAt, next.familyId, next.expiresAt],
  );
  return rowCount > 0;
}

/** How a session began (GET /auth/sessions' sign_in_method); null when not recorded or gone. */
export async function sessionMethod(db: Queryable, sessionId: string): Promise<string | null> {
  const { rows } = await db.query<{ sign_in_method: string | null }>(
    'SessionMethod',
    'SELECT sign_in_method FROM auth.sessions WHERE id = $1',
    [sessionId],
  );
  return rows[0]?.sign_in_method ?? null;
}

/** Ends a session (its tokens go with it); the account whose it was, or undefined when there was none. */
export async function deleteSession(
  db: Queryable,
  sessionId: string,
  accountId?: string,
): Promise<{ accountId: string } | undefined> {
  const { rows } = await db.query<{ account_id: string }>(
    'DeleteSession',
    'DELETE FROM auth.sessions WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid) RETURNING account_id',
    [sessionId, accountId ?? null],
  );
  return rows[0] ? { accountId: rows[0].account_id } : undefined;
}

/** Ends every session of an account, or every one but `keep`; the ids of the sessions ended. */
export async function deleteAccountSessions(
  db: Queryable,
  accountId: string,
  keep?: string,
): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'DeleteAccountSessions',
    `DELETE FROM auth.sessions WHERE account_id = $1 AND ($2::uuid IS NULL OR id <> $2::uuid) RETURNING id`,
    [accountId, keep ?? null],
  );
  return rows.map((r) => r.id);
}

/** The account's live sessions, newest first. */
export async function listAccountSessions(
  db: Queryable,
  accountId: string,
  now: Date,
): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    'ListAccountSessions',
    `SELECT id, created_at, last_active_at, expires_at, sign_in_method, user_agent, ip
       FROM auth.sessions WHERE account_id = $1 AND expires_at > $2
      ORDER BY created_at DESC, last_active_at DESC, id`,
    [accountId, now],
  );
  return rows.map((r) => ({
    ...r,
    created_at: new Date(r.created_at),
    last_active_at: new Date(r.last_active_at),
    expires_at: new Date(r.expires_at),
  }));
}
