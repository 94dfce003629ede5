/**
 * Registration attempts (auth.registration_attempts): what one registration request of a pending account
 * chose, kept apart from the account until that attempt's own link is followed. SQL lives here only.
 */
import type { Queryable } from '../db/database.ts';

/** `password`, `passwordless` and `passkey` attempts carry choices; a `resend` chose nothing. */
export type AttemptKind = 'password' | 'passwordless' | 'passkey' | 'resend';

export interface NewAttempt {
  id: string;
  accountId: string;
  kind: AttemptKind;
  passwordHash: string | null;
  defaultRole: string | null;
  roles: readonly string[] | null;
  userData: Record<string, unknown> | null;
  locale: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface AttemptRow {
  id: string;
  account_id: string;
  kind: AttemptKind;
  password_hash: string | null;
  default_role: string | null;
  roles: string[] | null;
  user_data: Record<string, unknown> | null;
  locale: string | null;
  created_at: Date;
  expires_at: Date;
}

const COLUMNS =
  'id, account_id, kind, password_hash, default_role, roles, user_data, locale, created_at, expires_at';

function toRow(row: AttemptRow): AttemptRow {
  const userData = row.user_data as unknown;
  return {
    ...row,
    user_data: typeof userData === 'string' ? JSON.parse(userData) : row.user_data,
    created_at: new Date(row.created_at),
    expires_at: new Date(row.expires_at),
  };
}

export async function insertAttempt(db: Queryable, a: NewAttempt): Promise<void> {
  await db.query(
    'InsertRegistrationAttempt',
    `INSERT INTO auth.registration_attempts (${COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6::text[], $7::jsonb, $8, $9, $10)`,
    [
      a.id,
      a.accountId,
      a.kind,
      a.passwordHash,
      a.defaultRole,
      a.roles,
      a.userData === null ? null : JSON.stringify(a.userData),
      a.locale,
      a.createdAt,
      a.expiresAt,
    ],
  );
}

/** The attempt `id` of `accountId`, if it is still there. */
export async function findAttempt(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<AttemptRow | undefined> {
  const { rows } = await db.query<AttemptRow>(
    'FindRegistrationAttempt',
    `SELECT ${COLUMNS} FROM auth.registration_attempts WHERE account_id = $1 AND id = $2`,
    [accountId, id],
  );
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** The account's latest registration (not a resend): the kind and locale a resent link follows. */
export async function newestAttempt(db: Queryable, accountId: string): Promise<AttemptRow | undefined> {
  const { rows } = await db.query<AttemptRow>(
    'NewestRegistrationAttempt',
    `SELECT ${COLUMNS} FROM auth.registration_attempts WHERE account_id = $1 AND kind <> 'resend'
      ORDER BY created_at DESC, id LIMIT 1`,
    [accountId],
  );
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** The password of the account's latest attempt that chose one (sign-in of a pending account). */
export async function newestAttemptPasswordHash(db: Queryable, accountId: string): Promise<string | null> {
  const { rows } = await db.query<{ password_hash: string }>(
    'NewestAttemptPasswordHash',
    `SELECT password_hash FROM auth.registration_attempts
      WHERE account_id = $1 AND password_hash IS NOT NULL
      ORDER BY created_at DESC, id LIMIT 1`,
    [accountId],
  );
  return rows[0]?.password_hash ?? null;
}

/**
 * How many attempts of the account other than `exceptId` had a link that could still be followed at
 * `since` or was sent later.
 */
export async function attemptsLiveSince(
  db: Queryable,
  accountId: string,
  since: Date,
  exceptId?: string,
): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'RegistrationAttemptsLiveSince',
    `SELECT count(*)::int AS n FROM auth.registration_attempts
      WHERE account_id = $1 AND expires_at > $2 AND ($3::uuid IS NULL OR id <> $3::uuid)`,
    [accountId, since, exceptId ?? null],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Drops attempts whose link expired before `before`. The caller passes now minus the longest link
 * lifetime: no live link can have been sent while such an attempt's link was live, so it no longer
 * matters to any activation.
 */
export async function purgeStaleAttempts(db: Queryable, accountId: string, before: Date): Promise<void> {
  await db.query(
    'PurgeStaleRegistrationAttempts',
    'DELETE FROM auth.registration_attempts WHERE account_id = $1 AND expires_at < $2',
    [accountId, before],
  );
}

/** Forgets every attempt of the account (it is active now). */
export async function deleteAttempts(db: Queryable, accountId: string): Promise<void> {
  await db.query(
    'DeleteRegistrationAttempts',
    'DELETE FROM auth.registration_attempts WHERE account_id = $1',
    [accountId],
  );
}
