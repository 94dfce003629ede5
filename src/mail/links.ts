/**
 * Links put in emails. The `redirect_to` they may lead to is checked by the caller before it gets here
 * (auth/redirects.ts).
 */
import type { Config } from '../config.ts';

/** `base` with query parameters added (kept after any existing ones, before a fragment). */
export function withParams(base: string, params: Record<string, string>): string {
  const hash = base.indexOf('#');
  const head = hash === -1 ? base : base.slice(0, hash);
  const tail = hash === -1 ? '' : base.slice(hash);
  const qs = new URLSearchParams(params).toString();
  return `${head}${head.includes('?') ? '&' : '?'}${qs}${tail}`;
}

/** A link to a route of this service, e.g. `serviceLink(config, '/auth/activate', {ticket})`. */
export function serviceLink(
  config: Pick<Config, 'SERVER_URL'>,
  route: string,
  params: Record<string, string>,
): string {
  return withParams(`${config.SERVER_URL.replace(/\/+$/, '')}${route}`, params);
}

/**
 * Where emailed links land when no app is named for them (no `redirect_to`, no REDIRECT_URL_SUCCESS)
 * outside production with the console on: the development console, whose pages complete each link.
 * Undefined otherwise (production always names its app).
 */
export function consoleLanding(
  config: Pick<Config, 'SERVER_URL' | 'CONSOLE_ENABLED' | 'isProduction'>,
): string | undefined {
  if (!config.CONSOLE_ENABLED || config.isProduction) return undefined;
  return `${config.SERVER_URL.replace(/\/+$/, '')}/console/`;
}

/**
 * Where an email that only points at the application leads (an email-change notice, "you already have
 * an account"): REDIRECT_URL_SUCCESS, else the development console (consoleLanding), else SERVER_URL.
 * SERVER_URL alone answers a JSON 404 at `/`.
 */
export function appHome(
  config: Pick<Config, 'SERVER_URL' | 'REDIRECT_URL_SUCCESS' | 'CONSOLE_ENABLED' | 'isProduction'>,
): string {
  return config.REDIRECT_URL_SUCCESS || consoleLanding(config) || config.SERVER_URL;
}

/**
 * The link of an email that must open the app (a password reset or an email change needs a form):
 * `redirect_to` when given, else REDIRECT_URL_SUCCESS, else the development console (consoleLanding),
 * else SERVER_URL, with `ticket` and `type` added.
 */
export function appLink(
  config: Pick<Config, 'SERVER_URL' | 'REDIRECT_URL_SUCCESS' | 'CONSOLE_ENABLED' | 'isProduction'>,
  redirectTo: string | undefined,
  params: { ticket: string; type: 'password-reset' | 'email-change' },
): string {
  const base = redirectTo ?? (config.REDIRECT_URL_SUCCESS || consoleLanding(config) || config.SERVER_URL);
  return withParams(base, params);
}
