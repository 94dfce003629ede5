/**
 * Links put in emails, and the `redirect_to` a client may ask for. A redirect target is accepted only
 * when it matches ALLOWED_REDIRECT_URLS, so a link that carries a refresh token (or a reset ticket) can
 * never be pointed at someone else's site.
 */
import { Type } from '@sinclair/typebox';
import { Email } from '../auth/schemas.ts';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { wildcardMatcher } from '../http/security.ts';

/**
 * True when `target` (an absolute http(s) URL) is allowed by ALLOWED_REDIRECT_URLS. An entry without a
 * path names an origin: `https://app.example.com` allows any page there, `https://*.example.com` any
 * subdomain, `http://localhost:*` any port. An entry with a path is compared with the target's origin
 * and path (query and fragment ignored): `https://app.example.com/auth/*`. `*` matches any run of
 * characters; everything else is literal and case-insensitive.
 */
export function redirectAllowed(config: Config, target: string): boolean {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  // Credentials in a redirect URL are a phishing trick, never a real need.
  if (url.username !== '' || url.password !== '') return false;
  const origin = url.origin;
  const withPath = origin + url.pathname;
  return config.ALLOWED_REDIRECT_URLS.some((entry) => {
    const hasPath = /^[a-z][a-z0-9+.-]*:\/\/[^/]*\/./i.test(entry);
    const subject = hasPath ? withPath : origin;
    return wildcardMatcher([hasPath ? entry : entry.replace(/\/$/, '')])(subject);
  });
}

/** The `redirect_to` field of the routes that email a link. */
export const RedirectTo = Type.String({
  maxLength: 2048,
  description:
    'Where the emailed link leads (instead of REDIRECT_URL_SUCCESS); must match ALLOWED_REDIRECT_URLS.',
});

/** Body of the routes that email a link to an address on request (resend activation, lost password). */
export const EmailLinkRequest = Type.Object(
  { email: Email, redirect_to: Type.Optional(RedirectTo) },
  { additionalProperties: false },
);

/** The validated `redirect_to`, or undefined when none was given; 400 when it is not allowed. */
export function checkRedirect(config: Config, redirectTo: string | undefined): string | undefined {
  if (redirectTo === undefined) return undefined;
  if (!redirectAllowed(config, redirectTo)) throw new AppError('REDIRECT_NOT_ALLOWED');
  return redirectTo;
}

/** `base` with query parameters added (kept after any existing ones, before a fragment). */
export function withParams(base: string, params: Record<string, string>): string {
  const hash = base.indexOf('#');
  const head = hash === -1 ? base : base.slice(0, hash);
  const tail = hash === -1 ? '' : base.slice(hash);
  const qs = new URLSearchParams(params).toString();
  return `${head}${head.includes('?') ? '&' : '?'}${qs}${tail}`;
}

/** A link to a route of this service, e.g. `serviceLink(config, '/auth/activate', {ticket})`. */
export function serviceLink(config: Config, route: string, params: Record<string, string>): string {
  return withParams(`${config.SERVER_URL.replace(/\/+$/, '')}${route}`, params);
}

/**
 * The link of an email that must open the app (a password reset or an email change needs a form):
 * `redirect_to` when given, else REDIRECT_URL_SUCCESS, else SERVER_URL, with `ticket` and `type` added.
 */
export function appLink(
  config: Config,
  redirectTo: string | undefined,
  params: { ticket: string; type: 'password-reset' | 'email-change' },
): string {
  const base = redirectTo ?? (config.REDIRECT_URL_SUCCESS || config.SERVER_URL);
  return withParams(base, params);
}
