/**
 * The `redirect_to` a client may ask for. A redirect target is accepted only when it matches
 * ALLOWED_REDIRECT_URLS, so a link that carries a refresh token (or a reset ticket) can never be pointed
 * at someone else's site.
 */
import { Type } from '@sinclair/typebox';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { wildcardMatcher } from '../http/security.ts';
import { Email } from './schemas.ts';

/**
 * True when `target` (an absolute http(s) URL) is allowed by ALLOWED_REDIRECT_URLS. An entry without a
 * path names an origin: `https://app.example.com` allows any page there, `https://*.example.com` any
 * subdomain, `http://localhost:*` any port. An entry with a path is compared with the target's origin
 * and path (query and fragment ignored): `https://app.example.com/auth/*`. `*` matches any run of
 * characters; everything else is literal and case-insensitive.
 */
export function redirectAllowed(config: Pick<Config, 'ALLOWED_REDIRECT_URLS'>, target: string): boolean {
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
export function checkRedirect(
  config: Pick<Config, 'ALLOWED_REDIRECT_URLS'>,
  redirectTo: string | undefined,
): string | undefined {
  if (redirectTo === undefined) return undefined;
  if (!redirectAllowed(config, redirectTo)) throw new AppError('REDIRECT_NOT_ALLOWED');
  return redirectTo;
}
