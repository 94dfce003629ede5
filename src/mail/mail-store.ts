/**
 * What the email flows keep on accounts besides the accounts store: the pending address of a verified
 * email change (HBP's `new_email` column, so Hasura clients that read it keep working; the ticket's
 * payload is what the change uses) and the locale emails are written in.
 */
import type { Queryable } from '../db/database.ts';
import { UniqueViolation } from '../db/database.ts';
import { AppError } from '../errors.ts';

/**
 * Records `email` as the account's pending address (null: none); EMAIL_NOT_ALLOWED when another account
 * holds it.
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
