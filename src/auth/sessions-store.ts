/**
 * Refresh tokens (auth.session_tokens), kept only as SHA-256 digests. Tokens rotated from one another
 * share a family (one sign-in) and its sign-in instant (`signed_in_at`); a rotated token keeps its row,
 * marked `rotated_at`, so that reuse can be recognised.
 */
import type { Queryable } from '../db/database.ts';

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

/** A token row to store. `signedInAt` is its family's sign-in instant (null: unknown). */
export interface NewSessionToken {
  tokenHash: string;
  familyId: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  signedInAt: Date | null;
}

/**
 * Stores a new token and, in the same statement, drops the account's expired ones (housekeeping HBP never
 * did): one round trip instead of two on every sign-in and refresh. The expired rows are those with
 * `expires_at <= createdAt`. Throws AccountGone when the account no longer exists.
 *
 * Lock order: the statement takes the account row (FOR KEY SHARE) before it touches any token row, as
 * an account's deletion does (the account, then its tokens by cascade). Locking a token row first and
 * the account second (the foreign-key check of the insert) let a sign-in or refresh racing
 * `POST /auth/delete` deadlock with it on PostgreSQL, and one of the two answered 500.
 */
export async function insertSessionToken(db: Queryable, row: NewSessionToken): Promise<void> {
  const { rowCount } = await db.query(
    'InsertSessionToken',
    `WITH account AS (
       SELECT id FROM auth.accounts WHERE id = $3 FOR KEY SHARE
     ), expired AS (
       DELETE FROM auth.session_tokens WHERE account_id = (SELECT id FROM account) AND expires_at <= $4
     )
     INSERT INTO auth.session_tokens (token_hash, family_id, account_id, created_at, expires_at, signed_in_at)
     SELECT $1, $2, account.id, $4, $5, $6 FROM account`,
    [row.tokenHash, row.familyId, row.accountId, row.createdAt, row.expiresAt, row.signedInAt],
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
 * the account's expired tokens, all or nothing; false (and nothing written) when the presented token was
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
     )
     INSERT INTO auth.session_tokens (token_hash, family_id, account_id, created_at, expires_at, signed_in_at)
     SELECT $2, $5, $3, $4, $6, rotated.signed_in_at FROM rotated`,
    [presentedHash, next.tokenHash, next.accountId, next.createdAt, next.familyId, next.expiresAt],
  );
  return rowCount > 0;
}

export async function deleteFamily(db: Queryable, familyId: string): Promise<number> {
  const { rowCount } = await db.query(
    'DeleteSessionFamily',
    'DELETE FROM auth.session_tokens WHERE family_id = $1',
    [familyId],
  );
  return rowCount;
}

/** Ends every session of an account, or every one but `keepFamily`. */
export async function deleteAccountSessions(
  db: Queryable,
  accountId: string,
  keepFamily?: string,
): Promise<number> {
  const { rowCount } = await db.query(
    'DeleteAccountSessions',
    `DELETE FROM auth.session_tokens WHERE account_id = $1 AND ($2::uuid IS NULL OR family_id <> $2::uuid)`,
    [accountId, keepFamily ?? null],
  );
  return rowCount;
}

/** Families of an account with a live token created within the second starting at `second`. */
export async function familiesIssuedAt(
  db: Queryable,
  accountId: string,
  second: Date,
  now: Date,
): Promise<string[]> {
  const { rows } = await db.query<{ family_id: string }>(
    'FamiliesIssuedAt',
    `SELECT DISTINCT family_id FROM auth.session_tokens
      WHERE account_id = $1 AND created_at >= $2 AND created_at < $2::timestamptz + interval '1 second'
        AND expires_at > $3`,
    [accountId, second, now],
  );
  return rows.map((r) => r.family_id);
}
