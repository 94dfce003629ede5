/**
 * The person's view of what they allowed: the clients, with scopes, resources and last use; withdrawing
 * one deletes its refresh tokens and puts its access tokens in the revoked list at once.
 */

import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { findAccountByUserId } from '../accounts-store.ts';
import { type RevocationDeps, revoke } from '../revocations.ts';
import type { OAuthServerDeps } from './deps.ts';
import { deleteClient, deleteGrant, listConsents } from './store.ts';
import { endFamilies } from './tokens-endpoint.ts';

export interface GrantView {
  client_id: string;
  client_name: string;
  scopes: string[];
  resources: string[];
  created_at: string;
  last_used_at: string | null;
}

/** The account of a signed-in user id (a token of an account deleted since is no one's). */
async function accountOf(deps: OAuthServerDeps, userId: string): Promise<string> {
  const a = await findAccountByUserId(deps.db, userId);
  if (!a) throw new AppError('UNAUTHENTICATED');
  return a.id;
}

export async function listGrants(deps: OAuthServerDeps, userId: string): Promise<GrantView[]> {
  const rows = await listConsents(deps.db, await accountOf(deps, userId));
  return rows.map((r) => ({
    client_id: r.client_id,
    client_name: r.client_name,
    scopes: r.scopes,
    resources: r.resources,
    created_at: new Date(r.created_at).toISOString(),
    last_used_at: r.last_used_at === null ? null : new Date(r.last_used_at).toISOString(),
  }));
}

export async function revokeGrant(
  deps: OAuthServerDeps,
  userId: string,
  clientId: string,
  from?: { sessionId?: string; client?: EventClient },
): Promise<void> {
  const accountId = await accountOf(deps, userId);
  const found = await deps.db.transaction(async (tx) => {
    const families = await deleteGrant(tx, accountId, clientId);
    if (families === undefined) return false;
    // Already deleted above; endFamilies deletes nothing more and revokes their access tokens.
    await endFamilies(deps, tx, families);
    await recordEvent(deps, tx, {
      type: 'oauth_grant_revoked',
      accountId,
      sessionId: from?.sessionId ?? null,
      client: from?.client ?? null,
      details: { client_id: clientId, by: 'owner' },
    });
    return true;
  });
  if (!found) throw new AppError('OAUTH_GRANT_NOT_FOUND');
}

/**
 * Deletes a client an operator registered (`gatehouse oauth-clients delete`): its consents and refresh
 * tokens go, its access tokens are refused at once, and each person who had allowed it sees it in their
 * security feed. False when there was no such client.
 */
export async function removeClient(
  deps: RevocationDeps & { db: Queryable & { transaction: OAuthServerDeps['db']['transaction'] } },
  clientId: string,
): Promise<boolean> {
  return deps.db.transaction(async (tx) => {
    const gone = await deleteClient(tx, clientId);
    if (!gone) return false;
    await revoke(deps, tx, { sessionIds: gone.families });
    for (const accountId of gone.accounts)
      await recordEvent(deps, tx, {
        type: 'oauth_grant_revoked',
        accountId,
        details: { client_id: clientId, by: 'operator' },
      });
    return true;
  });
}
