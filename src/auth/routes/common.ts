/** Small pieces shared by the auth route files. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import type { EventClient } from '../../events/types.ts';
import { presentedAccessToken, REFRESH_COOKIE, signedCookie } from '../../http/identity.ts';
import { AUTH_TIME_CLAIM, tokenFacts } from '../jwt.ts';
import type { Reauthentication } from '../reauth.ts';
import type { OwnSignIn } from '../sessions.ts';

/** The client of a request, as sessions and security events record it (the address as TRUST_PROXY allows). */
export function requestClient(request: FastifyRequest): EventClient {
  const ua = request.headers['user-agent'];
  return { ip: request.ip, userAgent: typeof ua === 'string' && ua !== '' ? ua : null };
}

/**
 * A POST without a body is validated as `{}`, so the answer names the missing field
 * (`"email" is required`) and routes without required fields accept a bare POST.
 */
export async function bodyDefaultsToObject(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

/**
 * The refresh token a request presents: the `refresh_token` query parameter, else the signed cookie. The
 * parameter wins because the client chose it for this very request, while the cookie comes along with
 * every request to the service (HBP let the cookie win, contract §2.2). A query token is no ambient
 * credential, so it needs no CSRF check; only a token taken from the cookie does (403 CSRF when a
 * request that changes something comes from a site not allowed). `cookieToo`: the cookie holds the same
 * token, so the answer must update (or clear) the cookie as well, or the cookie would keep a rotated
 * token whose next use looks like a replay. A cookie with a bad signature is ignored.
 */
export function presentedRefreshToken(
  request: FastifyRequest,
  query: { refresh_token?: string },
): { value: string; source: 'query' | 'cookie'; cookieToo: boolean } | undefined {
  if (query.refresh_token) {
    const cookie = signedCookie(request, REFRESH_COOKIE);
    return { value: query.refresh_token, source: 'query', cookieToo: cookie === query.refresh_token };
  }
  const cookie = request.cookieCredential(REFRESH_COOKIE);
  if (cookie !== undefined) return { value: cookie, source: 'cookie', cookieToo: true };
  return undefined;
}

/**
 * How the caller names its own session (kept when a security change ends the others): the `sid` of the
 * access token the signed-in context's hook verified, and the refresh token it presents (for tokens
 * signed before sessions had ids). Call in a signed-in route.
 */
export function ownSignIn(request: FastifyRequest): OwnSignIn {
  return {
    sessionId: tokenFacts(request.user)?.sessionId,
    // Names only the sign-in to keep, so no CSRF check: the credential is the access token that
    // signed-in context's hook verified (and checked for CSRF when it came from a cookie).
    refreshToken: signedCookie(request, REFRESH_COOKIE),
    client: requestClient(request),
  };
}

/**
 * The proof a request offers for a sensitive change (see auth/reauth.ts): the sign-in instant its access
 * token carries and the `password` it sent. Call in a signed-in route, whose hook verified that token.
 */
export function reauthentication(request: FastifyRequest, password: string | undefined): Reauthentication {
  const token = presentedAccessToken(request);
  const authTime = token === undefined ? undefined : decodeJwt(token)[AUTH_TIME_CLAIM];
  return {
    authTime: typeof authTime === 'number' ? authTime : undefined,
    password,
    guesses: request.server.guesses,
    address: request.ip,
  };
}
