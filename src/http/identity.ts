/**
 * Who is calling. Sources, in order: `Authorization: Bearer <jwt>` (scheme case-insensitive), then the
 * signed `permission_variables` cookie, which holds an access token and expires with it. A credential that
 * is present but invalid (bad signature, expired, wrong algorithm, malformed header) answers 401 with a
 * `WWW-Authenticate` challenge rather than silently making the caller anonymous.
 *
 * Every credential taken from a cookie (this one, and the refresh token of logout and refresh) is taken
 * through `request.cookieCredential`, which refuses a cross-site request that may change something
 * (403 `CSRF`, see csrf.ts).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AccessTokenVerifier, InvalidAccessToken, type PermissionVariables } from '../auth/jwt.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { crossSiteCheck } from './csrf.ts';

export const PERMISSION_COOKIE = 'permission_variables';
export const REFRESH_COOKIE = 'refresh_token';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's permission variables, or undefined when anonymous. Throws 401 on a bad credential. */
    identity(): Promise<PermissionVariables | undefined>;
    /** Like identity(), but anonymous callers get 401 `Not logged in`. */
    requireUser(): Promise<PermissionVariables>;
    /**
     * The value of the signed cookie `name` used as a credential: undefined when absent or tampered
     * with; 403 `CSRF` when the request may change something and comes from a site not allowed.
     */
    cookieCredential(name: string): string | undefined;
  }
}

const BEARER = /^Bearer +(\S+)\s*$/i;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

function invalid(reason: string): AppError {
  const quoted = reason.replace(/["\\]/g, "'");
  return new AppError('UNAUTHENTICATED', `Invalid access token: ${reason}.`, {
    headers: { 'www-authenticate': `Bearer error="invalid_token", error_description="${quoted}"` },
  });
}

/** The access token a request carries, from the header or the signed cookie. */
export function presentedAccessToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header !== undefined && header !== '') {
    const m = BEARER.exec(header);
    if (!m) {
      const scheme = /^\S*/.exec(header)?.[0] ?? '';
      throw invalid(
        /^bearer$/i.test(scheme)
          ? 'the Authorization header has "Bearer" but no token after it'
          : 'the Authorization header must be "Bearer <token>" (another scheme, or no scheme, was sent)',
      );
    }
    const token = m[1] as string;
    if (!JWT_SHAPE.test(token))
      throw invalid(
        'the bearer token is not a JWT (three base64url parts separated by dots); send the jwt_token of a sign-in or refresh',
      );
    return token;
  }
  return request.cookieCredential(PERMISSION_COOKIE);
}

/**
 * The value of the signed cookie `name`, without the CSRF check: for a cookie that is not the
 * request's credential. An unsigned or tampered cookie is ignored (HBP answered a bare 400 on every route).
 */
export function signedCookie(request: FastifyRequest, name: string): string | undefined {
  const raw = request.cookies?.[name];
  if (!raw) return undefined;
  const unsigned = request.unsignCookie(raw);
  return unsigned.valid && unsigned.value ? unsigned.value : undefined;
}

async function resolve(
  ctx: AppContext,
  verifier: AccessTokenVerifier,
  request: FastifyRequest,
): Promise<PermissionVariables | undefined> {
  const token = presentedAccessToken(request);
  if (token === undefined) return undefined;
  try {
    return await verifier.verify(token, ctx.clock.now());
  } catch (err) {
    if (err instanceof InvalidAccessToken) throw invalid(err.message);
    throw err;
  }
}

export const identityPlugin = fp(async (app: FastifyInstance, opts: { ctx: AppContext }) => {
  const cache = new WeakMap<FastifyRequest, Promise<PermissionVariables | undefined>>();
  const verifier = new AccessTokenVerifier(opts.ctx.keys, opts.ctx.config);
  const checkCrossSite = crossSiteCheck(opts.ctx.config);
  app.decorateRequest('cookieCredential', function (this: FastifyRequest, name: string) {
    const value = signedCookie(this, name);
    if (value !== undefined) checkCrossSite(this);
    return value;
  });
  app.decorateRequest('identity', function (this: FastifyRequest) {
    let p = cache.get(this);
    if (!p) {
      p = resolve(opts.ctx, verifier, this);
      cache.set(this, p);
    }
    return p;
  });
  app.decorateRequest('requireUser', async function (this: FastifyRequest) {
    const who = await this.identity();
    if (!who) throw new AppError('UNAUTHENTICATED');
    return who;
  });
});
