/**
 * Cross-site request forgery. A browser attaches cookies to requests that any site starts (a form post,
 * a fetch), so a credential taken from a cookie says nothing about which page wrote the request. A
 * request that may change something (any method but GET, HEAD and OPTIONS) and is authenticated by a
 * cookie must therefore show that it comes from this service's own origin or one the operator named:
 * SERVER_URL's, the request's own (`Host`), REDIRECT_URL_SUCCESS's, CORS_ORIGINS (or, when unset outside
 * production, any localhost origin, as for CORS) and the origins of ALLOWED_REDIRECT_URLS.
 *
 * The proof is the `Origin` header, which browsers send with every such request and pages cannot set.
 * Without it, `Sec-Fetch-Site: same-origin` or a `Referer` from an allowed origin will do. With none of
 * them the request is refused (OWASP's advice): every browser of the last years sends one, so what is
 * refused is a client that sends cookies like a browser but says nothing, which can send the access
 * token as `Authorization: Bearer` instead. Bearer requests never reach this check: no site can make a
 * browser add that header.
 */
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { corsOriginAllowed } from './security.ts';
import { originMatcher } from './url-patterns.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** `value`'s origin (`https://host[:port]`, lower-case, default port left out), or undefined. */
function originOf(value: string): string | undefined {
  try {
    const origin = new URL(value).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return typeof v === 'string' ? v : undefined;
}

function refused(): AppError {
  return new AppError('CSRF');
}

/**
 * The check for one configuration: throws 403 `CSRF` when `request` may change something and does not
 * come from an allowed origin. Call it only when a cookie is the request's credential.
 */
export function crossSiteCheck(
  config: Config,
): (request: FastifyRequest, opts?: { evenIfSafe?: boolean }) => void {
  const named = new Set(
    [config.SERVER_URL, config.REDIRECT_URL_SUCCESS]
      .filter((u) => u !== '')
      .map(originOf)
      .filter((o): o is string => o !== undefined),
  );
  const cors = corsOriginAllowed(config);
  // An ALLOWED_REDIRECT_URLS entry names its origin whatever its path.
  const redirects = originMatcher(config.ALLOWED_REDIRECT_URLS);
  const allowed = (origin: string, request: FastifyRequest) =>
    named.has(origin) ||
    origin === originOf(`${request.protocol}://${request.host}`) ||
    cors(origin) ||
    redirects(origin);

  return (request, opts = {}) => {
    if (SAFE_METHODS.has(request.method) && !opts.evenIfSafe) return;
    // `evenIfSafe`: a GET that acts on the cookie's session (linking a provider to it). A navigation the
    // person started themselves (typed, bookmarked) says so with `Sec-Fetch-Site: none`.
    if (opts.evenIfSafe && header(request, 'sec-fetch-site') === 'none') return;
    const origin = header(request, 'origin');
    if (origin !== undefined) {
      // `Origin: null` (sandboxed frames, some redirects) names no one and is refused.
      const o = originOf(origin);
      if (o !== undefined && allowed(o, request)) return;
      throw refused();
    }
    if (header(request, 'sec-fetch-site') === 'same-origin') return;
    const referer = header(request, 'referer');
    const r = referer === undefined ? undefined : originOf(referer);
    if (r !== undefined && allowed(r, request)) return;
    throw refused();
  };
}
