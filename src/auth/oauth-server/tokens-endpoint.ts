/**
 * The token endpoint's grants (authorization_code, refresh_token), revocation (RFC 7009), introspection
 * (RFC 7662) and userinfo. A code is single use: presented again, it ends every token issued from it.
 * Refresh tokens rotate; a rotated one presented again ends its family (reuse detection). A request may
 * narrow the scope or the resources of what it gets, never widen them. Ending a family refuses its
 * access tokens at once through the revoked list, as ending a session does.
 */
import { createHash, randomBytes } from 'node:crypto';
import { secretsEqual } from '../../constant-time.ts';
import type { Queryable } from '../../db/database.ts';
import { type AccountProfile, findAccountByUserId, loadProfile } from '../accounts-store.ts';
import { withCustomClaims } from '../custom-claims.ts';
import { revoke } from '../revocations.ts';
import { sha256Hex } from '../secrets.ts';
import { claimsOf } from '../sessions.ts';
import type { OAuthClient } from './clients.ts';
import { issuerOf, type OAuthServerDeps } from './deps.ts';
import { OAuthProtocolError } from './protocol-errors.ts';
import {
  consumeCode,
  deleteFamily,
  familyExists,
  findRefreshToken,
  insertFamily,
  insertRefreshToken,
  markRotated,
  sessionStands,
} from './store.ts';
import {
  signIdToken,
  signOAuthAccessToken,
  type VerifiedAccessToken,
  verifyOAuthAccessToken,
} from './tokens.ts';

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
  id_token?: string;
}

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

const grantError = (description: string) => new OAuthProtocolError('invalid_grant', description);

/** Ends token families: their refresh tokens are deleted and their access tokens refused at once. */
export async function endFamilies(
  deps: OAuthServerDeps,
  tx: Queryable,
  ids: readonly string[],
): Promise<void> {
  for (const id of ids) await deleteFamily(tx, id);
  await revoke(deps, tx, { sessionIds: [...ids] });
}

/** `requested` (space-separated, or a list) as a subset of `granted`; absent: all of `granted`. */
function narrowed(
  requested: string[] | undefined,
  granted: readonly string[],
  error: 'invalid_scope' | 'invalid_target',
): string[] {
  if (requested === undefined || requested.length === 0) return [...granted];
  const wider = requested.filter((s) => !granted.includes(s));
  if (wider.length > 0)
    throw new OAuthProtocolError(
      error,
      error === 'invalid_scope'
        ? 'the request asks for a scope beyond what was granted'
        : 'the request asks for a resource beyond what was granted',
    );
  return [...new Set(requested)].sort();
}

async function liveProfile(deps: OAuthServerDeps, accountId: string): Promise<AccountProfile> {
  const profile = await loadProfile(deps.db, accountId);
  if (!profile?.account.active || profile.account.disabled) throw grantError('the account cannot sign in');
  return profile;
}

async function tokensFor(
  deps: OAuthServerDeps,
  profile: AccountProfile,
  grant: {
    clientId: string;
    familyId: string;
    sessionId: string;
    scopes: string[];
    resources: string[];
    authTime: Date | null;
    nonce: string | null;
  },
  refreshToken: string,
  now: Date,
): Promise<TokenResponse> {
  const issuer = issuerOf(deps.config);
  const lifetimeS = deps.config.JWT_EXPIRES_IN * 60;
  // The person's own roles and claims, never more: what a sign-in of theirs would carry, the app's
  // custom claims included (its function and hook are told the client: `oauth-client:<client_id>`).
  const hasura = grant.scopes.includes('graphql')
    ? {
        namespace: deps.config.JWT_CLAIMS_NAMESPACE,
        vars: await withCustomClaims(
          deps.config,
          deps.db,
          now,
          profile,
          { id: grant.sessionId, method: `oauth-client:${grant.clientId}` },
          claimsOf(deps.config, profile),
        ),
      }
    : undefined;
  const access = await signOAuthAccessToken(
    deps.oauthKeys,
    {
      issuer,
      userId: profile.user.id,
      clientId: grant.clientId,
      scopes: grant.scopes,
      resources: grant.resources,
      sessionId: grant.sessionId,
      grantId: grant.familyId,
      authTime: grant.authTime,
      lifetimeS,
      hasura,
    },
    now,
  );
  const out: TokenResponse = {
    access_token: access.token,
    token_type: 'Bearer',
    expires_in: access.expiresIn,
    refresh_token: refreshToken,
    scope: grant.scopes.join(' '),
  };
  if (grant.scopes.includes('openid'))
    out.id_token = await signIdToken(
      deps.oauthKeys,
      {
        issuer,
        userId: profile.user.id,
        clientId: grant.clientId,
        nonce: grant.nonce,
        authTime: grant.authTime,
        sessionId: grant.sessionId,
        lifetimeS,
        claims: userClaims(profile, grant.scopes),
      },
      now,
    );
  return out;
}

/** The OpenID claims of the person for these scopes. */
export function userClaims(profile: AccountProfile, scopes: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (scopes.includes('email') && profile.account.email) {
    out.email = profile.account.email;
    out.email_verified = profile.account.email_verified;
  }
  if (scopes.includes('profile')) {
    out.name = profile.user.display_name ?? null;
    if (profile.user.avatar_url) out.picture = profile.user.avatar_url;
  }
  return out;
}

function newRefresh(deps: OAuthServerDeps, now: Date) {
  const token = randomBytes(32).toString('base64url');
  return {
    token,
    row: {
      hash: sha256Hex(token),
      createdAt: now,
      expiresAt: new Date(now.getTime() + deps.config.JWT_REFRESH_EXPIRES_IN * 60_000),
    },
  };
}

/** grant_type=authorization_code. */
export async function exchangeCode(
  deps: OAuthServerDeps,
  client: OAuthClient,
  p: { code?: string; redirect_uri?: string; code_verifier?: string; resource?: string[] },
): Promise<TokenResponse> {
  if (!p.code) throw new OAuthProtocolError('invalid_request', 'code is required');
  const now = deps.clock.now();
  const found = await consumeCode(deps.db, sha256Hex(p.code), now);
  if (!found) throw grantError('the code is not valid');
  const code = found.row;
  if (!found.fresh) {
    // Presented twice: whoever holds it may have stolen it, so what the first exchange issued ends too.
    await deps.db.transaction((tx) => endFamilies(deps, tx, [code.family_id]));
    throw grantError('the code was already used; the tokens issued from it are revoked');
  }
  if (code.client_id !== client.id) throw grantError('the code was issued to another client');
  if (code.expires_at.getTime() <= now.getTime()) throw grantError('the code has expired');
  if (p.redirect_uri !== code.redirect_uri)
    throw grantError('redirect_uri differs from the one of the authorization request');
  if (p.code_verifier === undefined || !VERIFIER.test(p.code_verifier))
    throw grantError('code_verifier is missing or malformed');
  const challenge = createHash('sha256').update(p.code_verifier, 'ascii').digest('base64url');
  if (!secretsEqual(challenge, code.code_challenge)) throw grantError('code_verifier does not match');
  const resources = narrowed(p.resource, code.resources, 'invalid_target');
  if (!(await sessionStands(deps.db, code.session_id, now)))
    throw grantError('the sign-in this code was given in has ended');
  const profile = await liveProfile(deps, code.account_id);
  const refresh = newRefresh(deps, now);
  await deps.db.transaction(async (tx) => {
    await insertFamily(
      tx,
      {
        id: code.family_id,
        account_id: code.account_id,
        client_id: code.client_id,
        session_id: code.session_id,
        scopes: code.scopes,
        resources: code.resources,
        auth_time: code.auth_time,
      },
      now,
    );
    await insertRefreshToken(tx, { ...refresh.row, familyId: code.family_id });
  });
  return tokensFor(
    deps,
    profile,
    {
      clientId: client.id,
      familyId: code.family_id,
      sessionId: code.session_id,
      scopes: code.scopes,
      resources,
      authTime: code.auth_time,
      nonce: code.nonce,
    },
    refresh.token,
    now,
  );
}

/** grant_type=refresh_token. */
export async function refreshGrant(
  deps: OAuthServerDeps,
  client: OAuthClient,
  p: { refresh_token?: string; scope?: string; resource?: string[] },
): Promise<TokenResponse> {
  if (!p.refresh_token) throw new OAuthProtocolError('invalid_request', 'refresh_token is required');
  const now = deps.clock.now();
  const hash = sha256Hex(p.refresh_token);
  const row = await findRefreshToken(deps.db, hash);
  if (!row || row.client_id !== client.id) throw grantError('the refresh token is not valid');
  if (row.expires_at.getTime() <= now.getTime()) throw grantError('the refresh token has expired');
  const scopes = narrowed(
    p.scope === undefined ? undefined : p.scope.split(' ').filter((s) => s !== ''),
    row.scopes,
    'invalid_scope',
  );
  const resources = narrowed(p.resource, row.resources, 'invalid_target');
  if (row.rotated_at !== null || !(await markRotated(deps.db, hash, now))) {
    // A rotated token came back: one of its two holders is not the client. End the family.
    await deps.db.transaction((tx) => endFamilies(deps, tx, [row.id]));
    throw grantError('the refresh token was already used; its grant is revoked');
  }
  if (!(await sessionStands(deps.db, row.session_id, now))) {
    await deps.db.transaction((tx) => endFamilies(deps, tx, [row.id]));
    throw grantError('the sign-in this grant was given in has ended');
  }
  const profile = await liveProfile(deps, row.account_id);
  const refresh = newRefresh(deps, now);
  await insertRefreshToken(deps.db, { ...refresh.row, familyId: row.id });
  return tokensFor(
    deps,
    profile,
    {
      clientId: client.id,
      familyId: row.id,
      sessionId: row.session_id,
      scopes,
      resources,
      authTime: row.auth_time,
      nonce: null,
    },
    refresh.token,
    now,
  );
}

/** Whether an access token of this server is live: verified, and neither its grant nor its session ended. */
export async function liveAccessToken(
  deps: OAuthServerDeps,
  token: string,
): Promise<VerifiedAccessToken | undefined> {
  const now = deps.clock.now();
  const t = await verifyOAuthAccessToken(deps.oauthKeys, issuerOf(deps.config), token, now);
  if (!t) return undefined;
  for (const sessionId of [t.grantId, t.sessionId]) {
    const refused = deps.revocations.refuses({ userId: t.sub, sessionId, issuedAt: t.iat });
    if (refused === true || (refused !== false && (await refused))) return undefined;
  }
  return t;
}

/** RFC 7009: ends the family of a refresh or access token of this client; unknown tokens are ignored. */
export async function revokeToken(deps: OAuthServerDeps, client: OAuthClient, token: string): Promise<void> {
  const row = await findRefreshToken(deps.db, sha256Hex(token));
  let familyId: string | undefined;
  if (row) {
    if (row.client_id === client.id) familyId = row.id;
  } else {
    const t = await verifyOAuthAccessToken(deps.oauthKeys, issuerOf(deps.config), token, deps.clock.now());
    if (t && t.clientId === client.id) familyId = t.grantId;
  }
  if (familyId === undefined) return;
  const id = familyId;
  await deps.db.transaction((tx) => endFamilies(deps, tx, [id]));
}

/** RFC 7662: what a token is, or `{active: false}`. */
export async function introspect(deps: OAuthServerDeps, token: string): Promise<Record<string, unknown>> {
  const now = deps.clock.now();
  const t = await liveAccessToken(deps, token);
  if (t)
    return {
      active: true,
      token_type: 'Bearer',
      client_id: t.clientId,
      scope: t.scope,
      sub: t.sub,
      aud: t.aud,
      iss: t.iss,
      iat: t.iat,
      exp: t.exp,
      jti: t.jti,
      sid: t.sessionId,
    };
  const row = await findRefreshToken(deps.db, sha256Hex(token));
  if (
    row &&
    row.rotated_at === null &&
    row.expires_at.getTime() > now.getTime() &&
    (await familyExists(deps.db, row.id))
  ) {
    const profile = await loadProfile(deps.db, row.account_id);
    if (profile?.account.active && !profile.account.disabled)
      return {
        active: true,
        token_type: 'refresh_token',
        client_id: row.client_id,
        scope: row.scopes.join(' '),
        sub: profile.user.id,
        exp: Math.floor(row.expires_at.getTime() / 1000),
      };
  }
  return { active: false };
}

/** The person behind an access token for the issuer's own APIs (no resource, or the issuer named). */
export async function userinfo(
  deps: OAuthServerDeps,
  token: string,
): Promise<Record<string, unknown> | undefined> {
  const t = await liveAccessToken(deps, token);
  if (!t) return undefined;
  const issuer = issuerOf(deps.config);
  const aud = Array.isArray(t.aud) ? t.aud : [t.aud];
  if (!aud.includes(issuer)) return undefined;
  const scopes = t.scope.split(' ');
  if (!scopes.includes('openid')) return undefined;
  const account = await findAccountByUserId(deps.db, t.sub);
  const profile = account ? await loadProfile(deps.db, account.id) : undefined;
  if (!profile) return undefined;
  return { sub: t.sub, ...userClaims(profile, scopes) };
}
