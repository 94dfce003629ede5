/**
 * Accounts (auth.accounts), their roles (auth.account_roles), the locale of their emails
 * (auth.account_locales) and the public.users row behind each.
 * SQL lives here only; a duplicate email becomes the domain error ACCOUNT_EXISTS.
 */

import { DatabaseError, type Queryable, UniqueViolation } from '../db/database.ts';
import { AppError } from '../errors.ts';

export interface AccountRow {
  id: string;
  user_id: string;
  email: string | null;
  active: boolean;
  password_hash: string | null;
  default_role: string;
  is_anonymous: boolean;
  mfa_enabled: boolean;
  /** Blocked by an operator (gatehouse users disable): no sign-in, no refresh. */
  disabled: boolean;
  /** The address is proven to be the account holder's (see EmailProof). */
  email_verified: boolean;
}

/**
 * What proved an account's address: a link mailed to it and followed (activation, magic-link,
 * password-reset, email-change), a provider that vouched for it when the account was made, or the
 * operator who created the account.
 */
export type ProofMethod =
  | 'activation'
  | 'magic-link'
  | 'password-reset'
  | 'email-change'
  | 'operator'
  | 'email-otp'
  | `provider:${string}`;

export interface EmailProof {
  by: ProofMethod;
  at: Date;
}

/** An account with what a session needs: roles and the public.users row (all columns, as JSON). */
export interface AccountProfile {
  account: AccountRow;
  roles: string[];
  user: Record<string, unknown> & { id: string; display_name: string | null; avatar_url: string | null };
}

export const ACCOUNT_COLUMNS = `a.id, a.user_id, a.email::text AS email, a.active, a.password_hash, a.default_role,
  a.is_anonymous, a.mfa_enabled, a.disabled_at IS NOT NULL AS disabled, a.email_verified_at IS NOT NULL AS email_verified`;

export async function findAccountByEmail(db: Queryable, email: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    'FindAccountByEmail',
    `SELECT ${ACCOUNT_COLUMNS} FROM auth.accounts a WHERE a.email = $1::citext`,
    [email],
  );
  return rows[0];
}

/**
 * The account of `email`, its row locked until the transaction ends: a registration attempt and the
 * activation of the same account then run one after the other.
 */
export async function lockAccountByEmail(tx: Queryable, email: string): Promise<AccountRow | undefined> {
  const { rows } = await tx.query<AccountRow>(
    'LockAccountByEmail',
    `SELECT ${ACCOUNT_COLUMNS} FROM auth.accounts a WHERE a.email = $1::citext FOR UPDATE`,
    [email],
  );
  return rows[0];
}

export async function findAccountById(db: Queryable, id: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    'FindAccountById',
    `SELECT ${ACCOUNT_COLUMNS} FROM auth.accounts a WHERE a.id = $1`,
    [id],
  );
  return rows[0];
}

/** The account of a `public.users` id (the `x-hasura-user-id` claim). */
export async function findAccountByUserId(db: Queryable, userId: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    'FindAccountByUserId',
    `SELECT ${ACCOUNT_COLUMNS} FROM auth.accounts a WHERE a.user_id = $1`,
    [userId],
  );
  return rows[0];
}

const PROFILE_SELECT = `SELECT ${ACCOUNT_COLUMNS}, to_jsonb(u.*) AS user,
            (SELECT array_agg(r.role ORDER BY r.created_at, r.role) FROM auth.account_roles r WHERE r.account_id = a.id) AS roles
       FROM auth.accounts a JOIN public.users u ON u.id = a.user_id`;

type ProfileRow = AccountRow & { user: AccountProfile['user'] | string; roles: string[] | null };

function toProfile(row: ProfileRow | undefined): AccountProfile | undefined {
  if (!row) return undefined;
  const { user, roles, ...account } = row;
  return {
    account,
    roles: roles ?? [],
    user: typeof user === 'string' ? JSON.parse(user) : user,
  };
}

export async function loadProfile(db: Queryable, accountId: string): Promise<AccountProfile | undefined> {
  const { rows } = await db.query<ProfileRow>('LoadAccountProfile', `${PROFILE_SELECT} WHERE a.id = $1`, [
    accountId,
  ]);
  return toProfile(rows[0]);
}

/** The account of an email with everything a session needs, in one round trip (sign-in). */
export async function loadProfileByEmail(db: Queryable, email: string): Promise<AccountProfile | undefined> {
  const { rows } = await db.query<ProfileRow>(
    'LoadAccountProfileByEmail',
    `${PROFILE_SELECT} WHERE a.email = $1::citext`,
    [email],
  );
  return toProfile(rows[0]);
}

/**
 * The distinct beginnings of the stored password hashes, up to the salt (`$2b$10`,
 * `$argon2id$v=19$m=19456,t=2,p=1`): which kinds of hash, with which costs, accounts still hold.
 */
export async function passwordHashPrefixes(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ prefix: string }>(
    'PasswordHashPrefixes',
    `SELECT DISTINCT CASE WHEN left(password_hash, 2) = '$2'
                          THEN '$' || split_part(password_hash, '$', 2) || '$' || split_part(password_hash, '$', 3)
                          ELSE '$' || split_part(password_hash, '$', 2) || '$' || split_part(password_hash, '$', 3)
                               || '$' || split_part(password_hash, '$', 4)
                     END AS prefix
       FROM auth.accounts WHERE password_hash IS NOT NULL`,
  );
  return rows.map((r) => r.prefix);
}

export interface NewAccount {
  email: string | null;
  passwordHash: string | null;
  active: boolean;
  isAnonymous: boolean;
  defaultRole: string;
  roles: readonly string[];
  /** public.users columns to set (display_name and registration custom fields); names are checked by config. */
  userData: Record<string, unknown>;
  /** How the address is already proven (a vouching provider, the operator); absent: not proven. */
  emailProof?: EmailProof;
}

/**
 * Creates the public.users row, the account and its roles. Call inside a transaction so a failure on any
 * step leaves nothing behind. Throws ACCOUNT_EXISTS on a duplicate email (including a concurrent one).
 */
export async function insertAccount(
  tx: Queryable,
  input: NewAccount,
): Promise<{ accountId: string; userId: string }> {
  const { rows: users } = await insertUserRow(tx, 'InsertUser', input.userData, 'id');
  const userId = (users[0] as { id: string }).id;
  let accountId: string;
  try {
    const { rows } = await tx.query<{ id: string }>(
      'InsertAccount',
      `INSERT INTO auth.accounts
         (user_id, email, password_hash, active, is_anonymous, default_role, email_verified_at, email_verified_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
      [
        userId,
        input.email,
        input.passwordHash,
        input.active,
        input.isAnonymous,
        input.defaultRole,
        input.emailProof?.at ?? null,
        input.emailProof?.by ?? null,
      ],
    );
    accountId = (rows[0] as { id: string }).id;
  } catch (err) {
    if (err instanceof UniqueViolation && err.constraint.includes('email')) {
      throw new AppError('ACCOUNT_EXISTS', undefined, { cause: err });
    }
    throw err;
  }
  await insertRoles(tx, accountId, input.roles);
  return { accountId, userId };
}

/** Column names come from the schema (REGISTRATION_CUSTOM_FIELDS, validated as plain identifiers). */
function columnList(names: readonly string[]): string {
  for (const c of names) {
    if (!/^[a-z_][a-z0-9_]*$/.test(c)) throw new Error(`not a plain column name: ${c}`);
  }
  return names.map((c) => `"${c}"`).join(', ');
}

function insertUserRow<T>(tx: Queryable, name: string, userData: Record<string, unknown>, returning: string) {
  const columns = Object.keys(userData);
  const list = columnList(columns);
  return tx.query<T>(
    name,
    columns.length === 0
      ? `INSERT INTO public.users DEFAULT VALUES RETURNING ${returning}`
      : // jsonb_populate_record casts each JSON value to its column's type; unlisted columns keep their defaults.
        `INSERT INTO public.users (${list})
         SELECT ${list} FROM jsonb_populate_record(NULL::public.users, $1::jsonb)
         RETURNING ${returning}`,
    columns.length === 0 ? [] : [JSON.stringify(userData)],
  );
}

async function insertRoles(tx: Queryable, accountId: string, roles: readonly string[]): Promise<void> {
  if (roles.length === 0) return;
  await tx.query(
    'InsertAccountRoles',
    // Roles read back in the order given: each row's created_at is one microsecond after the previous
    // one (clock_timestamp() alone can repeat on coarse clocks, and now() is fixed per transaction).
    `INSERT INTO auth.account_roles (account_id, role, created_at)
     SELECT $1, r.role, clock_timestamp() + r.ord * interval '1 microsecond'
       FROM unnest($2::text[]) WITH ORDINALITY AS r(role, ord)
     ON CONFLICT DO NOTHING`,
    [accountId, roles],
  );
}

/**
 * Checks that `userData` fits public.users (types, NOT NULL, CHECK, unique columns) by inserting it and
 * rolling the insert back (a savepoint, so triggers leave nothing either). Registration checks every
 * request this way, whether or not the address has an account, so a refusal says nothing about it.
 * Returns the row's display_name and avatar_url as the database would store them.
 */
export async function probeUserRow(
  tx: Queryable,
  userData: Record<string, unknown>,
): Promise<{ display_name: string | null; avatar_url: string | null }> {
  await tx.query('ProbeUserRowSavepoint', 'SAVEPOINT probe_user_row');
  try {
    const { rows } = await insertUserRow<{ display_name: string | null; avatar_url: string | null }>(
      tx,
      'ProbeUserRow',
      userData,
      'display_name, avatar_url',
    );
    return rows[0] as { display_name: string | null; avatar_url: string | null };
  } catch (err) {
    const state = err instanceof DatabaseError ? err.sqlState : undefined;
    // Class 22 (a value of the wrong type or size) and 23 (a constraint) are the client's data.
    if (err instanceof UniqueViolation || state?.startsWith('22') || state?.startsWith('23')) {
      throw new AppError('INVALID_USER_DATA', undefined, { cause: err });
    }
    throw err;
  } finally {
    await tx.query('ProbeUserRowRollback', 'ROLLBACK TO SAVEPOINT probe_user_row');
  }
}

/**
 * Sets public.users columns of `userId`: those in `values` to their value, the other `reset` columns to
 * their default. Unknown to `values` and not in `reset`: left as they are.
 */
export async function setUserFields(
  tx: Queryable,
  userId: string,
  values: Record<string, unknown>,
  reset: readonly string[],
): Promise<void> {
  const given = Object.keys(values);
  const defaults = reset.filter((c) => !given.includes(c));
  columnList([...given, ...defaults]);
  const assignments = [...given.map((c) => `"${c}" = r."${c}"`), ...defaults.map((c) => `"${c}" = DEFAULT`)];
  if (assignments.length === 0) return;
  await tx.query(
    'SetUserFields',
    `UPDATE public.users SET ${assignments.join(', ')}
       FROM jsonb_populate_record(NULL::public.users, $2::jsonb) AS r
      WHERE public.users.id = $1`,
    [userId, JSON.stringify(values)],
  );
}

/** The columns among `names` that can go back to a default (nullable, or with a DEFAULT). */
export async function resettableUserColumns(db: Queryable, names: readonly string[]): Promise<string[]> {
  if (names.length === 0) return [];
  const { rows } = await db.query<{ column_name: string }>(
    'ResettableUserColumns',
    `SELECT column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'users' AND column_name = ANY($1::text[])
        AND (is_nullable = 'YES' OR column_default IS NOT NULL)`,
    [names],
  );
  const ok = new Set(rows.map((r) => r.column_name));
  return names.filter((n) => ok.has(n));
}

/** Replaces the account's password hash (NULL: none), default role and roles. */
export async function setAccountCredentials(
  tx: Queryable,
  accountId: string,
  input: { passwordHash: string | null; defaultRole: string; roles: readonly string[] },
): Promise<void> {
  await tx.query(
    'SetAccountCredentials',
    'UPDATE auth.accounts SET password_hash = $2, default_role = $3 WHERE id = $1',
    [accountId, input.passwordHash, input.defaultRole],
  );
  await tx.query('DeleteAccountRoles', 'DELETE FROM auth.account_roles WHERE account_id = $1', [accountId]);
  await insertRoles(tx, accountId, input.roles);
}

/** Roles among `roles` that auth.roles does not know (the foreign key would refuse them). */
export async function unknownRoles(db: Queryable, roles: readonly string[]): Promise<string[]> {
  if (roles.length === 0) return [];
  const { rows } = await db.query<{ role: string }>(
    'KnownRoles',
    'SELECT role FROM auth.roles WHERE role = ANY($1::text[])',
    [roles],
  );
  const known = new Set(rows.map((r) => r.role));
  return roles.filter((r) => !known.has(r));
}

export async function setPasswordHash(db: Queryable, accountId: string, hash: string): Promise<void> {
  await db.query('SetPasswordHash', 'UPDATE auth.accounts SET password_hash = $2 WHERE id = $1', [
    accountId,
    hash,
  ]);
}

/** Replaces the hash only if it is still `oldHash` (a concurrent password change wins over a rehash). */
export async function upgradePasswordHash(
  db: Queryable,
  accountId: string,
  oldHash: string,
  newHash: string,
): Promise<void> {
  await db.query(
    'UpgradePasswordHash',
    'UPDATE auth.accounts SET password_hash = $3 WHERE id = $1 AND password_hash = $2',
    [accountId, oldHash, newHash],
  );
}

/**
 * Blocks (`at`) or unblocks (null) an account. Unblocking also activates an account still waiting for
 * activation: the operator vouches for it, as for an account created without emails.
 */
export async function setAccountDisabled(db: Queryable, accountId: string, at: Date | null): Promise<void> {
  await db.query(
    'SetAccountDisabled',
    `UPDATE auth.accounts SET disabled_at = $2, active = CASE WHEN $2::timestamptz IS NULL THEN true ELSE active END
      WHERE id = $1`,
    [accountId, at],
  );
}

/** Replaces the account's default role and roles (the default role among them). */
export async function setAccountRoles(
  tx: Queryable,
  accountId: string,
  input: { defaultRole: string; roles: readonly string[] },
): Promise<void> {
  await tx.query('SetDefaultRole', 'UPDATE auth.accounts SET default_role = $2 WHERE id = $1', [
    accountId,
    input.defaultRole,
  ]);
  await tx.query('DeleteAccountRoles', 'DELETE FROM auth.account_roles WHERE account_id = $1', [accountId]);
  await insertRoles(tx, accountId, input.roles);
}

/** The account's roles, in the order they were given. */
export async function accountRoles(db: Queryable, accountId: string): Promise<string[]> {
  const { rows } = await db.query<{ role: string }>(
    'AccountRoles',
    'SELECT role FROM auth.account_roles WHERE account_id = $1 ORDER BY created_at, role',
    [accountId],
  );
  return rows.map((r) => r.role);
}

/** One account as an operator sees it (gatehouse users list, the admin API). */
export interface AccountListing {
  id: string;
  user_id: string;
  email: string | null;
  display_name: string | null;
  active: boolean;
  disabled_at: Date | null;
  is_anonymous: boolean;
  mfa_enabled: boolean;
  email_verified: boolean;
  default_role: string;
  roles: string[];
  created_at: Date;
  /** created_at as PostgreSQL writes it (microseconds and offset): the exact key of a page cursor. */
  created_key: string;
}

const LISTING_SELECT = `SELECT a.id, a.user_id, a.email::text AS email, u.display_name, a.active, a.disabled_at,
            a.is_anonymous, a.mfa_enabled, a.email_verified_at IS NOT NULL AS email_verified, a.default_role,
            a.created_at, a.created_at::text AS created_key,
            coalesce((SELECT array_agg(r.role ORDER BY r.created_at, r.role) FROM auth.account_roles r
                       WHERE r.account_id = a.id), '{}') AS roles
       FROM auth.accounts a JOIN public.users u ON u.id = a.user_id`;

function toListing(r: AccountListing): AccountListing {
  return {
    ...r,
    created_at: new Date(r.created_at),
    disabled_at: r.disabled_at === null ? null : new Date(r.disabled_at),
  };
}

/** Where a page of accounts starts: after this (created_at, id), in that order. */
export interface ListingKey {
  /** created_at as PostgreSQL wrote it (AccountListing.created_key), checked by the caller. */
  createdAt: string;
  id: string;
}

/**
 * Up to `limit` accounts, oldest first, after `after` when given; `email`: only addresses that contain
 * it, case-insensitively (`%` and `_` match themselves).
 */
export async function listAccountsPage(
  db: Queryable,
  input: { limit: number; after?: ListingKey; email?: string },
): Promise<AccountListing[]> {
  const pattern = input.email === undefined ? null : `%${input.email.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await db
    .query<AccountListing>(
      'ListAccountsPage',
      `${LISTING_SELECT}
      WHERE ($1::text IS NULL OR a.email::text ILIKE $1::text)
        AND ($2::timestamptz IS NULL OR (a.created_at, a.id) > ($2::timestamptz, $3::uuid))
      ORDER BY a.created_at, a.id
      LIMIT $4`,
      [pattern, input.after?.createdAt ?? null, input.after?.id ?? null, input.limit],
    )
    .catch((err: unknown) => {
      // The page's start comes from a cursor a client sent back: a value the database cannot read (class
      // 22, checked before already) is the client's mistake.
      if (err instanceof DatabaseError && err.sqlState?.startsWith('22'))
        throw new AppError('VALIDATION', '"cursor" is not a cursor this service gave', { cause: err });
      throw err;
    });
  return rows.map(toListing);
}

/** One account as listed, by its user id (`x-hasura-user-id`). */
export async function findListingByUserId(
  db: Queryable,
  userId: string,
): Promise<AccountListing | undefined> {
  const { rows } = await db.query<AccountListing>(
    'FindAccountListing',
    `${LISTING_SELECT} WHERE a.user_id = $1`,
    [userId],
  );
  return rows[0] && toListing(rows[0]);
}

/** Records the address as proven (`proof`) or forgets that it was (null), whatever its address. */
export async function setEmailProof(
  db: Queryable,
  accountId: string,
  proof: EmailProof | null,
): Promise<void> {
  await db.query(
    'SetEmailProof',
    'UPDATE auth.accounts SET email_verified_at = $2, email_verified_by = $3 WHERE id = $1',
    [accountId, proof?.at ?? null, proof?.by ?? null],
  );
}

/**
 * Whether a pending account is as an operator made it: its address vouched for by the operator and no
 * registration attempt that chose something since (someone who typed the address, perhaps not its owner;
 * a resend of the link chooses nothing).
 */
export async function operatorMadeUntouched(db: Queryable, accountId: string): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>(
    'OperatorMadeUntouched',
    `SELECT a.email_verified_by = 'operator'
            AND NOT EXISTS (SELECT 1 FROM auth.registration_attempts r
                             WHERE r.account_id = a.id AND r.kind <> 'resend') AS ok
       FROM auth.accounts a WHERE a.id = $1`,
    [accountId],
  );
  return rows[0]?.ok === true;
}

/** Activates an inactive account; false when it was already active or is gone. */
export async function activateAccount(db: Queryable, accountId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'ActivateAccount',
    'UPDATE auth.accounts SET active = true WHERE id = $1 AND active = false',
    [accountId],
  );
  return rowCount > 0;
}

/**
 * Records that the account's address was proven, when it is still `address` (the one the proving link
 * was mailed to): an address changed since then is not the one proven. `first`: the address had no
 * proof until now.
 */
export async function markEmailProven(
  db: Queryable,
  accountId: string,
  address: string,
  proof: EmailProof,
): Promise<{ marked: boolean; first: boolean }> {
  const { rows } = await db.query<{ first: boolean }>(
    'MarkEmailProven',
    `UPDATE auth.accounts a SET email_verified_at = $3, email_verified_by = $4
       FROM (SELECT id, email_verified_at FROM auth.accounts WHERE id = $1 FOR UPDATE) before
      WHERE a.id = before.id AND a.email = $2::citext
      RETURNING before.email_verified_at IS NULL AS first`,
    [accountId, address, proof.at, proof.by],
  );
  return { marked: rows.length > 0, first: rows[0]?.first === true };
}

/** Removes the account's password (it signs in by its other ways, or sets one after a fresh sign-in). */
export async function clearPasswordHash(db: Queryable, accountId: string): Promise<void> {
  await db.query('ClearPasswordHash', 'UPDATE auth.accounts SET password_hash = NULL WHERE id = $1', [
    accountId,
  ]);
}

/** True when another account uses `email` as its address or as a pending new address. */
export async function emailTaken(db: Queryable, email: string, exceptAccountId?: string): Promise<boolean> {
  const { rows } = await db.query(
    'EmailTaken',
    `SELECT 1 FROM auth.accounts
      WHERE (email = $1::citext OR new_email = $1::citext) AND ($2::uuid IS NULL OR id <> $2::uuid)
      LIMIT 1`,
    [email, exceptAccountId ?? null],
  );
  return rows.length > 0;
}

/**
 * Sets the account's email; throws EMAIL_NOT_ALLOWED when another account took it meanwhile. A new
 * address is proven only with `proof` (a confirmed change): the database forgets the proof of the old
 * one (trigger forget_email_proof, migration 0010); the same address in another case keeps it.
 */
export async function setEmail(
  db: Queryable,
  accountId: string,
  email: string,
  proof?: EmailProof,
): Promise<void> {
  try {
    await db.query('SetEmail', 'UPDATE auth.accounts SET email = $2, new_email = NULL WHERE id = $1', [
      accountId,
      email,
    ]);
    if (proof) await markEmailProven(db, accountId, email, proof);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new AppError('EMAIL_NOT_ALLOWED', undefined, { cause: err });
    throw err;
  }
}

/** Deletes the public.users row; the account, its roles, sessions and tickets go with it (cascade). */
export async function deleteUser(db: Queryable, userId: string): Promise<boolean> {
  const { rowCount } = await db.query('DeleteUser', 'DELETE FROM public.users WHERE id = $1', [userId]);
  return rowCount > 0;
}

/** Columns of public.users (to check REGISTRATION_CUSTOM_FIELDS and JWT_CUSTOM_FIELDS at start). */
export async function userColumns(db: Queryable): Promise<Set<string>> {
  const { rows } = await db.query<{ column_name: string }>(
    'UserColumns',
    `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'users'`,
  );
  return new Set(rows.map((r) => r.column_name));
}

/**
 * Records `email` as the account's pending address (null: none), kept in HBP's `new_email` column so that
 * Hasura clients that read it keep working (the ticket's payload is what the change uses);
 * EMAIL_NOT_ALLOWED when another account holds it.
 */
export async function setPendingEmail(db: Queryable, accountId: string, email: string | null): Promise<void> {
  try {
    await db.query('SetPendingEmail', 'UPDATE auth.accounts SET new_email = $2 WHERE id = $1', [
      accountId,
      email,
    ]);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new AppError('EMAIL_NOT_ALLOWED', undefined, { cause: err });
    throw err;
  }
}

/**
 * Releases pending addresses whose email-change tickets have all expired or been used, so an abandoned
 * request does not keep an address from everyone else for ever (HBP's UNIQUE new_email did).
 */
export async function releaseStalePendingEmail(db: Queryable, email: string, now: Date): Promise<void> {
  await db.query(
    'ReleaseStalePendingEmail',
    `UPDATE auth.accounts a SET new_email = NULL
      WHERE a.new_email = $1::citext
        AND NOT EXISTS (
          SELECT 1 FROM auth.tickets t
           WHERE t.account_id = a.id AND t.purpose = 'email-change' AND t.used_at IS NULL AND t.expires_at > $2)`,
    [email, now],
  );
}

/** Records the locale of an account's emails (checked by the route schema and the table's CHECK). */
export async function setAccountLocale(db: Queryable, accountId: string, locale: string): Promise<void> {
  await db.query(
    'SetAccountLocale',
    `INSERT INTO auth.account_locales (account_id, locale) VALUES ($1, $2)
     ON CONFLICT (account_id) DO UPDATE SET locale = EXCLUDED.locale`,
    [accountId, locale],
  );
}

/** The locale of an account's emails, or undefined for the default templates. */
export async function accountLocale(db: Queryable, accountId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ locale: string | null }>(
    'AccountLocale',
    'SELECT locale FROM auth.account_locales WHERE account_id = $1',
    [accountId],
  );
  return rows[0]?.locale ?? undefined;
}

/** Forgets the locale of an account's emails (the default templates again). */
export async function clearAccountLocale(db: Queryable, accountId: string): Promise<void> {
  await db.query('ClearAccountLocale', 'DELETE FROM auth.account_locales WHERE account_id = $1', [accountId]);
}

/** Adds the roles that auth.roles does not list yet (the configured roles must exist there). */
export async function ensureRoles(db: Queryable, roles: readonly string[]): Promise<void> {
  await db.query(
    'EnsureRoles',
    'INSERT INTO auth.roles (role) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING',
    [roles],
  );
}
