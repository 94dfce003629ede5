/**
 * The SQL of email one-time codes: tickets of purpose 'email-otp' (auth.tickets, migration 0018). A code
 * is looked up by its account (six digits cannot be a key), and its row is used up or counted against
 * by its hash, each in one statement.
 */
import type { Queryable } from '../db/database.ts';

export interface EmailCodePayload {
  /** Random per code: the stored hash is sha256(salt:code). */
  salt: string;
  action: 'log-in' | 'register';
  /** The address the code was mailed to: the code proves this mailbox. */
  sent_to: string;
}

export interface LiveEmailCode {
  ticket_hash: string;
  payload: EmailCodePayload;
}

/** Stores a new code for the account; its earlier codes stop working (a new code retires the old). */
export async function insertEmailCode(
  tx: Queryable,
  code: { accountId: string; hash: string; payload: EmailCodePayload; now: Date; expiresAt: Date },
): Promise<void> {
  await tx.query(
    'RetireEmailCodes',
    `UPDATE auth.tickets SET used_at = $2 WHERE account_id = $1 AND purpose = 'email-otp' AND used_at IS NULL`,
    [code.accountId, code.now],
  );
  await tx.query(
    'InsertEmailCode',
    `INSERT INTO auth.tickets (ticket_hash, account_id, purpose, payload, created_at, expires_at)
     VALUES ($1, $2, 'email-otp', $3::jsonb, $4, $5)`,
    [code.hash, code.accountId, JSON.stringify(code.payload), code.now, code.expiresAt],
  );
}

/** The account's code that still works (the newest), or undefined. */
export async function liveEmailCode(
  db: Queryable,
  accountId: string,
  now: Date,
): Promise<LiveEmailCode | undefined> {
  const { rows } = await db.query<{ ticket_hash: string; payload: EmailCodePayload | string }>(
    'LiveEmailCode',
    `SELECT ticket_hash, payload FROM auth.tickets
      WHERE account_id = $1 AND purpose = 'email-otp' AND used_at IS NULL AND expires_at > $2
      ORDER BY created_at DESC LIMIT 1`,
    [accountId, now],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    ticket_hash: row.ticket_hash,
    payload: typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload,
  };
}

/**
 * Uses the code up: true for exactly one of any number of racing verifications (the row is updated only
 * while unused; a second statement waits for the first and then finds it used).
 */
export async function useEmailCode(tx: Queryable, hash: string, now: Date): Promise<boolean> {
  const { rowCount } = await tx.query(
    'UseEmailCode',
    `UPDATE auth.tickets SET used_at = $2
      WHERE ticket_hash = $1 AND purpose = 'email-otp' AND used_at IS NULL AND expires_at > $2`,
    [hash, now],
  );
  return rowCount > 0;
}

/** Counts a wrong code against the live one; at `maxTries` it is dead. */
export async function failEmailCode(db: Queryable, hash: string, now: Date, maxTries: number): Promise<void> {
  await db.query(
    'FailEmailCode',
    `UPDATE auth.tickets
        SET failed_attempts = failed_attempts + 1,
            used_at = CASE WHEN failed_attempts + 1 >= $3 THEN $2::timestamptz ELSE NULL END
      WHERE ticket_hash = $1 AND purpose = 'email-otp' AND used_at IS NULL AND expires_at > $2`,
    [hash, now, maxTries],
  );
}
