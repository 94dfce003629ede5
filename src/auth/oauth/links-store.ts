/**
 * Linked provider identities: HBP's auth.account_providers (one row per (provider, subject), at most one
 * per (account, provider)) and the sealed provider tokens beside them (auth.account_provider_tokens).
 */
import { type Queryable, UniqueViolation } from '../../db/database.ts';
import { ACCOUNT_COLUMNS, type AccountRow } from '../accounts-store.ts';

/** The account a provider identity is linked to, locked until the transaction ends. */
export async function findAccountByIdentity(
  db: Queryable,
  provider: string,
  subject: string,
): Promise<(AccountRow & { link_id: string }) | undefined> {
  const { rows } = await db.query<AccountRow & { link_id: string }>(
    'FindAccountByProviderIdentity',
    `SELECT ${ACCOUNT_COLUMNS}, p.id AS link_id
       FROM auth.account_providers p JOIN auth.accounts a ON a.id = p.account_id
      WHERE p.auth_provider = $1 AND p.auth_provider_unique_id = $2
      FOR UPDATE OF a`,
    [provider, subject],
  );
  return rows[0];
}

export interface ProviderLink {
  id: string;
  provider: string;
  subject: string;
}

/** The identities linked to an account. */
export async function accountLinks(db: Queryable, accountId: string): Promise<ProviderLink[]> {
  const { rows } = await db.query<ProviderLink>(
    'AccountProviderLinks',
    `SELECT id, auth_provider AS provider, auth_provider_unique_id AS subject
       FROM auth.account_providers WHERE account_id = $1 ORDER BY created_at, auth_provider`,
    [accountId],
  );
  return rows;
}

/** Why a link could not be stored. */
export type LinkConflict = 'identity-in-use' | 'provider-already-linked';

/**
 * Links an identity to an account. A concurrent link of the same identity, or a second identity of
 * the same provider on the account, is told apart by the constraint it breaks.
 */
export async function insertLink(
  tx: Queryable,
  accountId: string,
  provider: string,
  subject: string,
): Promise<{ id: string } | { conflict: LinkConflict }> {
  await tx.query('InsertProviderLinkSavepoint', 'SAVEPOINT insert_provider_link');
  try {
    const { rows } = await tx.query<{ id: string }>(
      'InsertProviderLink',
      `INSERT INTO auth.account_providers (account_id, auth_provider, auth_provider_unique_id)
       VALUES ($1, $2, $3) RETURNING id`,
      [accountId, provider, subject],
    );
    await tx.query('InsertProviderLinkRelease', 'RELEASE SAVEPOINT insert_provider_link');
    return { id: (rows[0] as { id: string }).id };
  } catch (err) {
    if (!(err instanceof UniqueViolation)) throw err;
    await tx.query('InsertProviderLinkRollback', 'ROLLBACK TO SAVEPOINT insert_provider_link');
    return {
      conflict: err.constraint.includes('unique_id') ? 'identity-in-use' : 'provider-already-linked',
    };
  }
}

/** Removes the account's link to `provider`; false when there was none. */
export async function deleteLink(tx: Queryable, accountId: string, provider: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    'DeleteProviderLink',
    'DELETE FROM auth.account_providers WHERE account_id = $1 AND auth_provider = $2',
    [accountId, provider],
  );
  return rowCount > 0;
}

/** Removes every provider link of the account; the providers whose links went. */
export async function deleteAccountLinks(tx: Queryable, accountId: string): Promise<string[]> {
  const { rows } = await tx.query<{ auth_provider: string }>(
    'DeleteAccountProviderLinks',
    'DELETE FROM auth.account_providers WHERE account_id = $1 RETURNING auth_provider',
    [accountId],
  );
  return rows.map((r) => r.auth_provider);
}

/** Stores (or replaces) the sealed tokens of a link. */
export async function saveLinkTokens(
  db: Queryable,
  linkId: string,
  sealed: string,
  expiresAt: Date | null,
  now: Date,
): Promise<void> {
  await db.query(
    'SaveProviderTokens',
    `INSERT INTO auth.account_provider_tokens (account_provider_id, sealed_tokens, expires_at, updated_at)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (account_provider_id)
       DO UPDATE SET sealed_tokens = EXCLUDED.sealed_tokens, expires_at = EXCLUDED.expires_at,
                     updated_at = EXCLUDED.updated_at`,
    [linkId, sealed, expiresAt, now],
  );
}

export async function deleteLinkTokens(db: Queryable, linkId: string): Promise<void> {
  await db.query(
    'DeleteProviderTokens',
    'DELETE FROM auth.account_provider_tokens WHERE account_provider_id = $1',
    [linkId],
  );
}

/** The sealed tokens of the account's link to `provider`. */
export async function findLinkTokens(
  db: Queryable,
  accountId: string,
  provider: string,
): Promise<{ linkId: string; sealed: string | null } | undefined> {
  const { rows } = await db.query<{ link_id: string; sealed_tokens: string | null }>(
    'FindProviderTokens',
    `SELECT p.id AS link_id, t.sealed_tokens
       FROM auth.account_providers p
       LEFT JOIN auth.account_provider_tokens t ON t.account_provider_id = p.id
      WHERE p.account_id = $1 AND p.auth_provider = $2`,
    [accountId, provider],
  );
  const row = rows[0];
  return row ? { linkId: row.link_id, sealed: row.sealed_tokens } : undefined;
}

/** Locks the account row until the transaction ends. */
export async function lockAccount(tx: Queryable, accountId: string): Promise<void> {
  await tx.query('LockAccountForLinks', 'SELECT 1 FROM auth.accounts WHERE id = $1 FOR UPDATE', [accountId]);
}
