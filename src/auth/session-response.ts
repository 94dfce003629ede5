/**
 * How a session goes back to the client (contract §2.3). `cookie` true (the default): the refresh token
 * is set as a signed, httpOnly cookie together with the `permission_variables` cookie, and the body has no
 * `refresh_token`. `cookie` false: both cookies are cleared and the body carries the refresh token.
 * The `permission_variables` cookie holds the access token itself and expires with it, so it can never
 * outlive the access token (HBP's lived 30 days and survived logout).
 */
import type { FastifyReply } from 'fastify';
import type { Config } from '../config.ts';
import { cookieOptions } from '../http/cookies.ts';
import { PERMISSION_COOKIE, REFRESH_COOKIE } from '../http/identity.ts';
import type { SessionBody } from './schemas.ts';
import type { Session } from './sessions.ts';

export function setSessionCookies(reply: FastifyReply, config: Config, session: Session, now: Date): void {
  const refreshS = Math.max(0, Math.floor((session.refreshExpiresAt.getTime() - now.getTime()) / 1000));
  const accessS = Math.max(0, Math.floor((session.access.expiresAt.getTime() - now.getTime()) / 1000));
  reply.setCookie(REFRESH_COOKIE, session.refreshToken, cookieOptions(config, refreshS));
  reply.setCookie(PERMISSION_COOKIE, session.access.token, cookieOptions(config, accessS));
}

export function clearSessionCookies(reply: FastifyReply, config: Config): void {
  const { maxAge: _m, signed: _s, ...opts } = cookieOptions(config, 0);
  reply.clearCookie(REFRESH_COOKIE, opts);
  reply.clearCookie(PERMISSION_COOKIE, opts);
}

/**
 * Applies the cookie rule and returns the JSON body. `leaveCookies` (a refresh by query parameter) returns
 * the token in the body without touching cookies the client may hold for another sign-in.
 */
export function sendSession(
  reply: FastifyReply,
  config: Config,
  session: Session,
  useCookie: boolean,
  now: Date,
  opts: { leaveCookies?: boolean } = {},
): SessionBody {
  const body: SessionBody = {
    jwt_token: session.access.token,
    jwt_expires_in: session.access.expiresInMs,
    user: session.user,
  };
  if (useCookie) {
    setSessionCookies(reply, config, session, now);
  } else {
    if (!opts.leaveCookies) clearSessionCookies(reply, config);
    body.refresh_token = session.refreshToken;
  }
  return body;
}
