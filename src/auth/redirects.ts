/**
 * The `redirect_to` a client may ask for. A redirect target is accepted only when it matches
 * ALLOWED_REDIRECT_URLS, so a link that carries a refresh token (or a reset ticket) can never be pointed
 * at someone else's site.
 */
import { Type } from '@sinclair/typebox';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { urlMatcher } from '../http/url-patterns.ts';
import { Email } from './schemas.ts';

/**
 * True when `target` (an absolute http(s) URL) is allowed by ALLOWED_REDIRECT_URLS. An entry without a
 * path names an origin: `https://app.example.com` allows any page there, `https://*.example.com` any
 * subdomain at any depth, `http://localhost:*` any port. An entry with a path also limits the target's
 * path (query and fragment are not compared): `https://app.example.com/auth/*`. What `*` may stand for,
 * component by component, is in url-patterns.ts (the matcher CORS and the CSRF check use too).
 */
export function redirectAllowed(config: Pick<Config, 'ALLOWED_REDIRECT_URLS'>, target: string): boolean {
  return urlMatcher(config.ALLOWED_REDIRECT_URLS)(target);
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
