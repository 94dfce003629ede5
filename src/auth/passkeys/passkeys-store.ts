/**
 * Passkeys (auth.passkeys) and their ceremonies' challenges (auth.passkey_challenges), migration 0016.
 * SQL lives here only; a credential id registered twice becomes PASSKEY_ALREADY_REGISTERED here.
 */
import type { Queryable } from '../../db/database.ts';
import { UniqueViolation } from '../../db/database.ts';
import { AppError } from '../../errors.ts';

/** The ceremonies a challenge can finish: each challenge finishes only its own. */
export type CeremonyKind = 'register' | 'login' | 'signup' | 'reauthenticate';

export interface NewChallenge {
  /** SHA-256 (hex) of the challenge sent to the browser. */
  id: string;
  kind: CeremonyKind;
  accountId: string | null;
  userHandle: string | null;
  signup: Record<string, unknown> | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface ChallengeRow {
  id: string;
  kind: CeremonyKind;
  account_id: string | null;
  user_handle: string | null;
  signup: Record<string, unknown> | null;
  expires_at: Date;
}

/** Stores a challenge and, in the same statement, drops the expired ones (nobody else cleans them). */
export async function insertChallenge(db: Queryable, c: NewChallenge): Promise<void> {
  await db.query(
    'InsertPasskeyChallenge',
    `WITH expired AS (DELETE FROM auth.passkey_challenges WHERE expires_at <= $6)
     INSERT INTO auth.passkey_challenges (id, kind, account_id, user_handle, signup, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)`,
    [
      c.id,
      c.kind,
      c.accountId,
      c.userHandle,
      c.signup === null ? null : JSON.stringify(c.signup),
      c.createdAt,
      c.expiresAt,
    ],
  );
}

/**
 * Uses up the challenge `id` whatever its kind or age: one statement reads and deletes it, so of two
 * requests presenting it at once only one gets it, and a challenge presented to the wrong ceremony is
 * gone too. The caller checks kind, account and expiry.
 */
export async function consumeChallenge(db: Queryable, id: string): Promise<ChallengeRow | undefined> {
  const { rows } = await db.query<ChallengeRow>(
    'ConsumePasskeyChallenge',
    `DELETE FROM auth.passkey_challenges WHERE id = $1
     RETURNING id, kind, account_id, user_handle, signup, expires_at`,
    [id],
  );
  const row = rows[0];
  if (!row) return undefined;
  const signup = row.signup as unknown;
  return {
    ...row,
    signup: typeof signup === 'string' ? JSON.parse(signup) : row.signup,
    expires_at: new Date(row.expires_at),
  };
}

export interface NewPasskey {
  id: string;
  accountId: string;
  /** Set for a sign-up that waits for activation: the passkey belongs to that attempt until then. */
  attemptId: string | null;
  credentialId: string;
  publicKey: Uint8Array;
  counter: number;
  transports: readonly string[];
  backedUp: boolean;
  userHandle: string;
  name: string;
  createdAt: Date;
}

/** A passkey as its owner sees it (no public key); times in ISO 8601. */
export interface PasskeyView {
  id: string;
  credential_id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  backed_up: boolean;
  transports: string[];
}

interface ViewRow extends Omit<PasskeyView, 'created_at' | 'last_used_at'> {
  created_at: Date | string;
  last_used_at: Date | string | null;
}

function toView(row: ViewRow): PasskeyView {
  return {
    ...row,
    created_at: new Date(row.created_at).toISOString(),
    last_used_at: row.last_used_at === null ? null : new Date(row.last_used_at).toISOString(),
  };
}

const VIEW_COLUMNS = 'id, credential_id, name, created_at, last_used_at, backed_up, transports';

/** Stores a new passkey; PASSKEY_ALREADY_REGISTERED when its credential id is on any account already. */
export async function insertPasskey(db: Queryable, p: NewPasskey): Promise<PasskeyView> {
  try {
    const { rows } = await db.query<ViewRow>(
      'InsertPasskey',
      `INSERT INTO auth.passkeys (id, account_id, attempt_id, credential_id, public_key, counter, transports,
                                  backed_up, user_handle, name, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::text[], $8, $9, $10, $11)
       RETURNING ${VIEW_COLUMNS}`,
      [
        p.id,
        p.accountId,
        p.attemptId,
        p.credentialId,
        Buffer.from(p.publicKey),
        p.counter,
        p.transports,
        p.backedUp,
        p.userHandle,
        p.name,
        p.createdAt,
      ],
    );
    return toView(rows[0] as ViewRow);
  } catch (err) {
    if (err instanceof UniqueViolation && err.constraint.includes('credential_id'))
      throw new AppError('PASSKEY_ALREADY_REGISTERED', undefined, { cause: err });
    throw err;
  }
}

/** What a sign-in needs of a passkey. */
export interface StoredPasskey {
  id: string;
  account_id: string;
  name: string;
  credential_id: string;
  public_key: Uint8Array;
  counter: number;
  transports: string[];
  user_handle: string;
}

/**
 * The passkey of a credential id that can sign in: one of an account, not one still waiting with its
 * sign-up's attempt for the activation.
 */
export async function findUsablePasskey(
  db: Queryable,
  credentialId: string,
): Promise<StoredPasskey | undefined> {
  const { rows } = await db.query<StoredPasskey & { counter: string | number }>(
    'FindUsablePasskey',
    `SELECT id, account_id, name, credential_id, public_key, counter, transports, user_handle
       FROM auth.passkeys WHERE credential_id = $1 AND attempt_id IS NULL`,
    [credentialId],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { ...row, public_key: new Uint8Array(row.public_key), counter: Number(row.counter) };
}

/**
 * Records a verified use: the new signature counter, the backed-up flag and the time. Conditional on the
 * stored counter, so that of two assertions carrying the same counter (a replayed or cloned one racing
 * the real one) only one is accepted; false when the counter did not move forward.
 */
export async function recordPasskeyUse(
  db: Queryable,
  id: string,
  use: { counter: number; backedUp: boolean; at: Date },
): Promise<boolean> {
  const { rowCount } = await db.query(
    'RecordPasskeyUse',
    `UPDATE auth.passkeys SET counter = $2, backed_up = $3, last_used_at = $4
      WHERE id = $1 AND (counter < $2 OR (counter = 0 AND $2 = 0))`,
    [id, use.counter, use.backedUp, use.at],
  );
  return rowCount > 0;
}

/** The passkeys of an account, oldest first (pending sign-up passkeys are not the account's yet). */
export async function listPasskeys(db: Queryable, accountId: string): Promise<PasskeyView[]> {
  const { rows } = await db.query<ViewRow>(
    'ListPasskeys',
    `SELECT ${VIEW_COLUMNS} FROM auth.passkeys WHERE account_id = $1 AND attempt_id IS NULL
      ORDER BY created_at, id`,
    [accountId],
  );
  return rows.map(toView);
}

/** The WebAuthn user handle the account's passkeys were made for, if it has any. */
export async function accountUserHandle(db: Queryable, accountId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_handle: string }>(
    'PasskeyUserHandle',
    `SELECT user_handle FROM auth.passkeys WHERE account_id = $1 AND attempt_id IS NULL
      ORDER BY created_at LIMIT 1`,
    [accountId],
  );
  return rows[0]?.user_handle;
}

export async function renamePasskey(
  db: Queryable,
  accountId: string,
  id: string,
  name: string,
): Promise<PasskeyView | undefined> {
  const { rows } = await db.query<ViewRow>(
    'RenamePasskey',
    `UPDATE auth.passkeys SET name = $3 WHERE account_id = $1 AND id = $2 AND attempt_id IS NULL
     RETURNING ${VIEW_COLUMNS}`,
    [accountId, id, name],
  );
  return rows[0] ? toView(rows[0]) : undefined;
}

export async function deletePasskey(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<PasskeyView | undefined> {
  const { rows } = await db.query<ViewRow>(
    'DeletePasskey',
    `DELETE FROM auth.passkeys WHERE account_id = $1 AND id = $2 AND attempt_id IS NULL
     RETURNING ${VIEW_COLUMNS}`,
    [accountId, id],
  );
  return rows[0] ? toView(rows[0]) : undefined;
}

/**
 * Removes every passkey of the account (pending ones stay with their attempts): the first proof of its
 * address hands the account to the mailbox (flows/link-emails.ts handOverToMailbox).
 */
export async function deleteAccountPasskeys(db: Queryable, accountId: string): Promise<void> {
  await db.query(
    'DeleteAccountPasskeys',
    'DELETE FROM auth.passkeys WHERE account_id = $1 AND attempt_id IS NULL',
    [accountId],
  );
}

/** How many passkeys the account can sign in with. */
export async function countPasskeys(db: Queryable, accountId: string): Promise<number> {
  const { rows } = await db.query<{ n: string | number }>(
    'CountPasskeys',
    'SELECT count(*) AS n FROM auth.passkeys WHERE account_id = $1 AND attempt_id IS NULL',
    [accountId],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * At activation: drops every passkey the waiting account holds, except that of the attempt whose link
 * alone activated it (`keepAttemptId`), which becomes the account's. The other attempts' passkeys go
 * with their attempts.
 */
export async function settlePendingPasskeys(
  db: Queryable,
  accountId: string,
  keepAttemptId: string | undefined,
): Promise<PasskeyView | undefined> {
  await db.query(
    'SettlePendingPasskeys',
    `DELETE FROM auth.passkeys
      WHERE account_id = $1 AND (attempt_id IS NULL OR attempt_id IS DISTINCT FROM $2::uuid)`,
    [accountId, keepAttemptId ?? null],
  );
  if (keepAttemptId === undefined) return undefined;
  const { rows } = await db.query<ViewRow>(
    'AdoptPendingPasskey',
    `UPDATE auth.passkeys SET attempt_id = NULL WHERE account_id = $1 AND attempt_id = $2
     RETURNING ${VIEW_COLUMNS}`,
    [accountId, keepAttemptId],
  );
  return rows[0] ? toView(rows[0]) : undefined;
}
