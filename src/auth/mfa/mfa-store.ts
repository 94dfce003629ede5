/**
 * SQL of the MFA feature: HBP's auth.accounts.otp_secret / mfa_enabled (the active, encrypted secret and
 * the flag) and auth.account_mfa (pending secret, replay step, wrong-code counter). Every check that two
 * concurrent requests could race on is one conditional statement.
 */
import { createHash } from 'node:crypto';
import type { Queryable } from '../../db/database.ts';

export interface MfaAccount {
  id: string;
  userId: string;
  email: string | null;
  /** Checked when a sensitive MFA change is confirmed with the current password. */
  passwordHash: string | null;
  active: boolean;
  mfaEnabled: boolean;
  /** The active secret: sealed (`gh1:…`), or base32 in clear when written by HBP. */
  otpSecret: string | null;
  pendingSecret: string | null;
  lastUsedStep: number | null;
}

interface AccountRow {
  id: string;
  user_id: string;
  email: string | null;
  password_hash: string | null;
  active: boolean;
  mfa_enabled: boolean;
  otp_secret: string | null;
  pending_secret: string | null;
  last_used_step: string | number | null;
}

const SELECT_ACCOUNT = `
  SELECT a.id, a.user_id, a.email::text AS email, a.password_hash, a.active, a.mfa_enabled, a.otp_secret,
         m.pending_secret, m.last_used_step
    FROM auth.accounts a LEFT JOIN auth.account_mfa m ON m.account_id = a.id`;

function toAccount(row: AccountRow | undefined): MfaAccount | undefined {
  if (!row) return undefined;
  return {
    id: row.id,
    userId: row.user_id,
    email: row.email,
    passwordHash: row.password_hash,
    active: row.active,
    mfaEnabled: row.mfa_enabled,
    otpSecret: row.otp_secret,
    pendingSecret: row.pending_secret,
    lastUsedStep: row.last_used_step === null ? null : Number(row.last_used_step),
  };
}

export async function findMfaAccountByUserId(db: Queryable, userId: string): Promise<MfaAccount | undefined> {
  const { rows } = await db.query<AccountRow>(
    'FindMfaAccountByUserId',
    `${SELECT_ACCOUNT} WHERE a.user_id = $1`,
    [userId],
  );
  return toAccount(rows[0]);
}

export async function findMfaAccountById(db: Queryable, accountId: string): Promise<MfaAccount | undefined> {
  const { rows } = await db.query<AccountRow>('FindMfaAccountById', `${SELECT_ACCOUNT} WHERE a.id = $1`, [
    accountId,
  ]);
  return toAccount(rows[0]);
}

/** Stores a new pending secret (replacing an earlier pending one; the active secret is not touched). */
export async function savePendingSecret(
  db: Queryable,
  accountId: string,
  sealed: string,
  now: Date,
): Promise<void> {
  await db.query(
    'SaveMfaPendingSecret',
    `INSERT INTO auth.account_mfa (account_id, pending_secret, pending_created_at, updated_at)
     VALUES ($1, $2, $3, $3)
     ON CONFLICT (account_id) DO UPDATE
       SET pending_secret = EXCLUDED.pending_secret, pending_created_at = $3, updated_at = $3`,
    [accountId, sealed, now],
  );
}

/**
 * Counts a code attempt against the account's fixed window before the code is checked (so parallel
 * guesses cannot slip past the limit); a right code resets the count. Returns the count in the window
 * and when the window ends.
 */
export async function countCodeAttempt(
  db: Queryable,
  accountId: string,
  now: Date,
  windowS: number,
): Promise<{ count: number; windowEnds: Date }> {
  const { rows } = await db.query<{ failed_codes: number; failed_window_start: Date | string }>(
    'CountMfaCodeAttempt',
    `INSERT INTO auth.account_mfa AS m (account_id, failed_codes, failed_window_start, updated_at)
     VALUES ($1, 1, $2, $2)
     ON CONFLICT (account_id) DO UPDATE SET
       failed_codes = CASE WHEN m.failed_window_start IS NULL
                             OR m.failed_window_start <= $2::timestamptz - make_interval(secs => $3)
                           THEN 1 ELSE m.failed_codes + 1 END,
       failed_window_start = CASE WHEN m.failed_window_start IS NULL
                                    OR m.failed_window_start <= $2::timestamptz - make_interval(secs => $3)
                                  THEN $2::timestamptz ELSE m.failed_window_start END,
       updated_at = $2
     RETURNING failed_codes, failed_window_start`,
    [accountId, now, windowS],
  );
  const row = rows[0] as { failed_codes: number; failed_window_start: Date | string };
  return {
    count: row.failed_codes,
    windowEnds: new Date(new Date(row.failed_window_start).getTime() + windowS * 1000),
  };
}

/**
 * Records `step` as the account's last accepted step and clears the wrong-code count, only if `step` is
 * later than the last accepted one. False means the code was already used (a replay, or a concurrent
 * request with the same code that won).
 */
export async function claimStep(db: Queryable, accountId: string, step: number, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    'ClaimMfaStep',
    `INSERT INTO auth.account_mfa AS m (account_id, last_used_step, updated_at)
     VALUES ($1, $2, $3)
     ON CONFLICT (account_id) DO UPDATE
       SET last_used_step = $2, failed_codes = 0, failed_window_start = NULL, updated_at = $3
       WHERE m.last_used_step IS NULL OR m.last_used_step < $2
     RETURNING account_id`,
    [accountId, step, now],
  );
  return rows.length > 0;
}

/** Makes `sealed` the active secret and turns MFA on; false when it was already on. */
export async function activateMfa(
  db: Queryable,
  accountId: string,
  sealed: string,
  now: Date,
): Promise<boolean> {
  const { rowCount } = await db.query(
    'ActivateMfa',
    `UPDATE auth.accounts SET otp_secret = $2, mfa_enabled = true, updated_at = $3
      WHERE id = $1 AND mfa_enabled = false`,
    [accountId, sealed, now],
  );
  if (rowCount === 0) return false;
  await db.query(
    'ClearMfaPendingSecret',
    `UPDATE auth.account_mfa SET pending_secret = NULL, pending_created_at = NULL, updated_at = $2
      WHERE account_id = $1`,
    [accountId, now],
  );
  return true;
}

/** Turns MFA off and forgets every secret (active and pending); false when it was already off. */
export async function deactivateMfa(db: Queryable, accountId: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    'DeactivateMfa',
    `UPDATE auth.accounts SET otp_secret = NULL, mfa_enabled = false, updated_at = $2
      WHERE id = $1 AND mfa_enabled = true`,
    [accountId, now],
  );
  if (rowCount === 0) return false;
  await db.query(
    'ResetMfaState',
    `UPDATE auth.account_mfa
        SET pending_secret = NULL, pending_created_at = NULL, last_used_step = NULL, updated_at = $2
      WHERE account_id = $1`,
    [accountId, now],
  );
  return true;
}

/** Replaces an active secret with its re-encrypted form, unless it changed meanwhile. */
export async function resealActiveSecret(
  db: Queryable,
  accountId: string,
  previous: string,
  sealed: string,
): Promise<void> {
  await db.query(
    'ResealMfaSecret',
    'UPDATE auth.accounts SET otp_secret = $3 WHERE id = $1 AND otp_secret = $2',
    [accountId, previous, sealed],
  );
}

/** Active secrets not sealed under the current key (`currentPrefix`), in id order after `afterId`. */
export async function listSecretsToReseal(
  db: Queryable,
  currentPrefix: string,
  afterId: string | null,
  limit: number,
): Promise<{ id: string; otp_secret: string }[]> {
  const { rows } = await db.query<{ id: string; otp_secret: string }>(
    'ListMfaSecretsToReseal',
    `SELECT id, otp_secret FROM auth.accounts
      WHERE otp_secret IS NOT NULL AND left(otp_secret, length($1)) <> $1
        AND ($2::uuid IS NULL OR id > $2::uuid)
      ORDER BY id LIMIT $3`,
    [currentPrefix, afterId, limit],
  );
  return rows;
}

const ticketHash = (ticket: string) => createHash('sha256').update(ticket, 'utf8').digest('hex');

/**
 * Counts an attempt against a valid MFA-login ticket before its code is checked, in one statement, so
 * that no more than `maxAttempts` codes are ever tried with one ticket even when requests race. Returns
 * the account and the attempt number, or undefined when the ticket is unknown, of another purpose,
 * expired, used, or out of attempts.
 */
export async function countTicketAttempt(
  db: Queryable,
  ticket: string,
  now: Date,
  maxAttempts: number,
): Promise<{ accountId: string; attempt: number } | undefined> {
  const { rows } = await db.query<{ account_id: string; failed_attempts: number }>(
    'CountMfaTicketAttempt',
    `UPDATE auth.tickets SET failed_attempts = failed_attempts + 1
      WHERE ticket_hash = $1 AND purpose = 'mfa-login' AND used_at IS NULL AND expires_at > $2
        AND failed_attempts < $3
      RETURNING account_id, failed_attempts`,
    [ticketHash(ticket), now, maxAttempts],
  );
  const row = rows[0];
  return row ? { accountId: row.account_id, attempt: row.failed_attempts } : undefined;
}

/** Uses up an MFA-login ticket; false when it is no longer valid. */
export async function useTicket(db: Queryable, ticket: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    'UseMfaTicket',
    `UPDATE auth.tickets SET used_at = $2
      WHERE ticket_hash = $1 AND purpose = 'mfa-login' AND used_at IS NULL AND expires_at > $2`,
    [ticketHash(ticket), now],
  );
  return rowCount > 0;
}

/** Retires an account's unused MFA-login tickets (MFA was turned off: no second step is pending any more). */
export async function retireMfaTickets(db: Queryable, accountId: string, now: Date): Promise<void> {
  await db.query(
    'RetireMfaTickets',
    `UPDATE auth.tickets SET used_at = $2 WHERE account_id = $1 AND purpose = 'mfa-login' AND used_at IS NULL`,
    [accountId, now],
  );
}
