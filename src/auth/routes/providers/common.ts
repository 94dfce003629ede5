/**
 * Pieces shared by the /auth/providers routes: the browser-binding cookie, the provider path parameter,
 * and how a finished (or failed) sign-in answers the browser.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, logLevelOf } from '../../../errors.ts';
import { cookieOptions } from '../../../http/cookies.ts';
import { signedCookie } from '../../../http/identity.ts';
import { withParams } from '../../../mail/links.ts';
import { signInEvent } from '../../../metrics/events.ts';
import type { ConfigDeps } from '../../deps.ts';
import { enabledProvider, type ProviderOutcome } from '../../flows/oauth.ts';
import { randomValue } from '../../oauth/oauth2.ts';
import type { Provider } from '../../oauth/providers.ts';
import { sendSession, setSessionCookies } from '../../session-response.ts';

const COOKIE_PATH = '/auth/providers';

/**
 * The cookie that binds a sign-in to the browser that started it. SameSite=Lax reaches the callback,
 * a top-level GET from the provider; Apple comes back with a cross-site POST, which only a
 * SameSite=None cookie reaches, and browsers keep those only when Secure.
 */
function bindingCookie(provider: Provider): { name: string; sameSite: 'lax' | 'none'; forceSecure: boolean } {
  return provider.responseMode === 'form_post'
    ? { name: 'oauth_binding_post', sameSite: 'none', forceSecure: true }
    : { name: 'oauth_binding', sameSite: 'lax', forceSecure: false };
}

/** The browser's binding value (kept when present, so sign-ins in two tabs both finish), set again. */
export function bindBrowser(
  ctx: ConfigDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: Provider,
): string {
  const cookie = bindingCookie(provider);
  const value = signedCookie(request, cookie.name) ?? randomValue();
  reply.setCookie(cookie.name, value, {
    ...cookieOptions(ctx.config, ctx.config.PROVIDER_STATE_EXPIRES_IN * 60),
    path: COOKIE_PATH,
    sameSite: cookie.sameSite,
    secure: cookie.forceSecure || ctx.config.COOKIE_SECURE,
  });
  return value;
}

export function browserBinding(request: FastifyRequest, provider: Provider): string | undefined {
  return signedCookie(request, bindingCookie(provider).name);
}

export const ProviderParam = (names: readonly string[]) =>
  Type.Object(
    {
      provider: Type.String({
        maxLength: 32,
        description: `An enabled provider: ${names.join(', ')}. Any other answers 404.`,
      }),
    },
    { additionalProperties: false },
  );

/** The enabled provider named in the path; 404 for any other. */
export const providerOf = enabledProvider;

/** Where a successful sign-in lands: `redirect_to`, else PROVIDER_SUCCESS_REDIRECT, else REDIRECT_URL_SUCCESS. */
export function successTarget(ctx: ConfigDeps, redirectTo: string | undefined): string {
  return redirectTo ?? (ctx.config.PROVIDER_SUCCESS_REDIRECT || ctx.config.REDIRECT_URL_SUCCESS);
}

/**
 * 302 to the success target with `refresh_token` (the session cookies set unless `cookie=false`), or
 * with `mfa=true&ticket=…` for an account with a second factor. Without any target (development) the
 * session is answered as JSON, as emailed links do.
 */
export function signInSucceeded(ctx: ConfigDeps, reply: FastifyReply, outcome: ProviderOutcome) {
  const target = successTarget(ctx, outcome.redirectTo);
  if (outcome.kind === 'mfa') {
    signInEvent('provider', 'mfa_required');
    if (!target) return reply.code(200).send({ mfa: true, ticket: outcome.ticket });
    return reply.redirect(withParams(target, { mfa: 'true', ticket: outcome.ticket }), 302);
  }
  signInEvent('provider', 'success');
  const now = ctx.clock.now();
  if (!target)
    return reply.code(200).send(sendSession(reply, ctx.config, outcome.session, outcome.useCookie, now));
  if (outcome.useCookie) setSessionCookies(reply, ctx.config, outcome.session, now);
  return reply.redirect(withParams(target, { refresh_token: outcome.session.refreshToken }), 302);
}

/**
 * A sign-in that cannot go on: 302 to PROVIDER_FAILURE_REDIRECT (else REDIRECT_URL_ERROR) with
 * `error=<code>&provider=<p>`, nothing else from the provider echoed. Without either, the error is
 * answered as JSON. Errors that are not the service's own (a fault) go to the error handler.
 */
export function signInFailed(
  ctx: ConfigDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: string,
  err: unknown,
) {
  if (!(err instanceof AppError)) throw err;
  signInEvent('provider', 'refused');
  const target = ctx.config.PROVIDER_FAILURE_REDIRECT || ctx.config.REDIRECT_URL_ERROR;
  if (!target) throw err;
  const level = logLevelOf(err.code);
  // The message names the step that failed; the cause (a network error) is summarised, never dumped:
  // it could carry what the provider sent.
  const cause = err.cause instanceof Error ? err.cause.message : undefined;
  if (level) request.log[level]({ errorCode: err.code, provider, cause }, err.message);
  else request.log.info({ errorCode: err.code, provider }, 'provider sign-in refused');
  return reply.redirect(withParams(target, { error: err.code, provider }), 302);
}
