/**
 * How a followed email link (activation, magic link) answers. Success: 302 to `redirect_to` (kept in the
 * ticket) or REDIRECT_URL_SUCCESS with `refresh_token` added, the session cookies set unless
 * `cookie=false` (which leaves cookies untouched). With neither target configured outside production
 * (a development set-up), the link lands on the development console when it is on (signed in by the
 * cookies, never with the refresh token in its address), else the session is answered as JSON, so the
 * link still visibly works. Failure: 302 to REDIRECT_URL_ERROR, else (no REDIRECT_URL_SUCCESS either) to
 * the console with `error=<code>`, else 401.
 */
import type { FastifyReply } from 'fastify';
import { AppError } from '../../errors.ts';
import { consoleLanding, withParams } from '../../mail/links.ts';
import type { ConfigDeps } from '../deps.ts';
import type { LinkOutcome } from '../flows/magic-link.ts';
import { sendSession, setSessionCookies } from '../session-response.ts';

/**
 * In production an emailed link must land on the app: without REDIRECT_URL_SUCCESS the link answers
 * 500 naming the setting, checked before the ticket is spent so it still works once the setting is fixed.
 */
export function assertLinkTargetConfigured(deps: ConfigDeps): void {
  if (deps.config.isProduction && !deps.config.REDIRECT_URL_SUCCESS)
    throw new AppError('REDIRECT_NOT_CONFIGURED');
}

export function linkSucceeded(
  deps: ConfigDeps,
  reply: FastifyReply,
  outcome: LinkOutcome,
  useCookie: boolean,
) {
  const target = outcome.redirectTo ?? deps.config.REDIRECT_URL_SUCCESS;
  if (outcome.kind === 'mfa') {
    // The second factor is still to come: hand over the MFA ticket, never a session.
    const to = target || consoleLanding(deps.config);
    if (!to) return reply.code(200).send({ mfa: true, ticket: outcome.ticket });
    return reply.redirect(withParams(to, { mfa: 'true', ticket: outcome.ticket }), 302);
  }
  const now = deps.clock.now();
  if (!target) {
    const landing = consoleLanding(deps.config);
    if (landing && useCookie) {
      setSessionCookies(reply, deps.config, outcome.session, now);
      return reply.redirect(withParams(landing, { signed_in: 'true' }), 302);
    }
    return reply.code(200).send(sendSession(reply, deps.config, outcome.session, useCookie, now));
  }
  if (useCookie) setSessionCookies(reply, deps.config, outcome.session, now);
  return reply.redirect(withParams(target, { refresh_token: outcome.session.refreshToken }), 302);
}

export function linkFailed(deps: ConfigDeps, reply: FastifyReply, code: 'INVALID_TOKEN' | 'INVALID_TICKET') {
  if (deps.config.REDIRECT_URL_ERROR) return reply.redirect(deps.config.REDIRECT_URL_ERROR, 302);
  // Only when no app is named at all: an app named for success handles its own failures.
  const landing = deps.config.REDIRECT_URL_SUCCESS ? undefined : consoleLanding(deps.config);
  if (landing) return reply.redirect(withParams(landing, { error: code }), 302);
  throw new AppError(code);
}
