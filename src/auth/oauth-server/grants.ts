/**
 * The person's view of what they allowed: the clients, with scopes, resources and last use; withdrawing
 * one deletes its refresh tokens and puts its access tokens in the revoked list at once.
 */
import { AppError } from '../../errors.ts';
import { findAccountByUserId } from '../accounts-store.ts';
import type { OAuthServerDeps } from './deps.ts';
import { deleteGrant, listConsents } from './store.ts';
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

export async function revokeGrant(deps: OAuthServerDeps, userId: string, clientId: string): Promise<void> {
  const accountId = await accountOf(deps, userId);
  const found = await deps.db.transaction(async (tx) => {
    const families = await deleteGrant(tx, accountId, clientId);
    if (families === undefined) return false;
    // Already deleted above; endFamilies deletes nothing more and revokes their access tokens.
    await endFamilies(deps, tx, families);
    return true;
  });
  if (!found) throw new AppError('OAUTH_GRANT_NOT_FOUND');
}
