/**
 * The authorization server's tokens. Access tokens are RFC 9068 JWTs (`typ: at+jwt`) whose audience is
 * the resource(s) granted (RFC 8707), so a token minted for one MCP server is refused by another; without
 * a resource they are for the issuer's own APIs (userinfo). `sid` names the person's sign-in and
 * `grant_id` the token family: the revoked list (auth/revocations.ts) refuses either at once.
 */
import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify, SignJWT } from 'jose';
import type { PermissionVariables } from '../jwt.ts';
import type { OAuthKeys } from './keys.ts';

export const GRANT_ID_CLAIM = 'grant_id';

export interface AccessTokenInput {
  issuer: string;
  userId: string;
  clientId: string;
  scopes: string[];
  /** Resources granted; empty: the issuer's own APIs. */
  resources: string[];
  sessionId: string;
  grantId: string;
  authTime: Date | null;
  lifetimeS: number;
  /** With the `graphql` scope: the person's Hasura claims, under this namespace. */
  hasura?: { namespace: string; vars: PermissionVariables };
}

/** The audience of a token for `resources`: one string for one, an array for several, else the issuer. */
export function audienceOf(issuer: string, resources: readonly string[]): string | string[] {
  if (resources.length === 0) return issuer;
  return resources.length === 1 ? (resources[0] as string) : [...resources];
}

export async function signOAuthAccessToken(
  keys: OAuthKeys,
  input: AccessTokenInput,
  now: Date,
): Promise<{ token: string; expiresIn: number }> {
  const iat = Math.floor(now.getTime() / 1000);
  const signer = keys.signer(now);
  const payload: Record<string, unknown> = {
    client_id: input.clientId,
    scope: input.scopes.join(' '),
    sid: input.sessionId,
    [GRANT_ID_CLAIM]: input.grantId,
  };
  if (input.authTime) payload.auth_time = Math.floor(input.authTime.getTime() / 1000);
  if (input.hasura) {
    const claims: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(input.hasura.vars)) claims[`x-hasura-${k}`] = v;
    payload[input.hasura.namespace] = claims;
  }
  const token = await new SignJWT(payload)
    .setProtectedHeader({ alg: keys.algorithm, typ: 'at+jwt', ...(signer.kid ? { kid: signer.kid } : {}) })
    .setIssuer(input.issuer)
    .setSubject(input.userId)
    .setAudience(audienceOf(input.issuer, input.resources))
    .setIssuedAt(iat)
    .setExpirationTime(iat + input.lifetimeS)
    .setJti(randomUUID())
    .sign(signer.key);
  return { token, expiresIn: input.lifetimeS };
}

export async function signIdToken(
  keys: OAuthKeys,
  input: {
    issuer: string;
    userId: string;
    clientId: string;
    nonce: string | null;
    authTime: Date | null;
    sessionId: string;
    lifetimeS: number;
    claims: Record<string, unknown>;
  },
  now: Date,
): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  const signer = keys.signer(now);
  const payload: Record<string, unknown> = { ...input.claims, sid: input.sessionId };
  if (input.nonce !== null) payload.nonce = input.nonce;
  if (input.authTime) payload.auth_time = Math.floor(input.authTime.getTime() / 1000);
  return new SignJWT(payload)
    .setProtectedHeader({ alg: keys.algorithm, typ: 'JWT', ...(signer.kid ? { kid: signer.kid } : {}) })
    .setIssuer(input.issuer)
    .setSubject(input.userId)
    .setAudience(input.clientId)
    .setIssuedAt(iat)
    .setExpirationTime(iat + input.lifetimeS)
    .sign(signer.key);
}

export interface VerifiedAccessToken {
  sub: string;
  clientId: string;
  scope: string;
  aud: string | string[];
  iss: string;
  iat: number;
  exp: number;
  sessionId: string;
  grantId: string;
  jti: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** An access token of this server, verified (signature, `typ`, issuer, expiry); undefined otherwise. */
export async function verifyOAuthAccessToken(
  keys: OAuthKeys,
  issuer: string,
  token: string,
  now: Date,
): Promise<VerifiedAccessToken | undefined> {
  try {
    const kid = decodeProtectedHeader(token).kid;
    const live = keys.verifiers(now);
    const key = live.find((k) => k.kid === kid)?.key ?? live[0]?.key;
    if (!key) return undefined;
    const { payload } = await jwtVerify(token, key, {
      algorithms: [keys.algorithm],
      issuer,
      typ: 'at+jwt',
      currentDate: now,
      requiredClaims: ['exp', 'iat', 'sub', 'aud', 'jti'],
    });
    const p = payload as Record<string, unknown>;
    if (
      typeof p.client_id !== 'string' ||
      typeof p.sid !== 'string' ||
      !UUID.test(p.sid) ||
      typeof p[GRANT_ID_CLAIM] !== 'string' ||
      !UUID.test(p[GRANT_ID_CLAIM] as string)
    )
      return undefined;
    return {
      sub: p.sub as string,
      clientId: p.client_id,
      scope: typeof p.scope === 'string' ? p.scope : '',
      aud: p.aud as string | string[],
      iss: p.iss as string,
      iat: p.iat as number,
      exp: p.exp as number,
      sessionId: p.sid,
      grantId: p[GRANT_ID_CLAIM] as string,
      jti: p.jti as string,
    };
  } catch {
    return undefined;
  }
}
