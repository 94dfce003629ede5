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
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  AccessTokenVerifier,
  InvalidAccessToken,
  type PermissionVariables,
  tokenFacts,
} from '../auth/jwt.ts';
import type { JwtKeys } from '../auth/keys.ts';
import type { Revocations } from '../auth/revocations.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { AppError, type ErrorCode } from '../errors.ts';
import { crossSiteCheck } from './csrf.ts';

export const PERMISSION_COOKIE = 'permission_variables';
export const REFRESH_COOKIE = 'refresh_token';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's permission variables, or undefined when anonymous. Throws 401 on a bad credential. */
    identity(): Promise<PermissionVariables | undefined>;
    /**
     * The signed-in caller. Set by the hook of a signed-in context (`signedInRoutes`) before the
     * handler runs, so every route registered there can read it; reading it elsewhere throws.
     */
    user: PermissionVariables;
    /**
     * The value of the signed cookie `name` used as a credential: undefined when absent or tampered
     * with; 403 `CSRF` when the request may change something and comes from a site not allowed.
     */
    cookieCredential(name: string): string | undefined;
  }
  interface FastifyContextConfig {
    /** In a signed-in context: the error a caller without a credential gets (default UNAUTHENTICATED). */
    anonymousError?: ErrorCode;
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

/** What the identity plugin needs: the keys and settings that verify tokens, and the time. */
export interface IdentityDeps {
  readonly config: Config;
  readonly keys: JwtKeys;
  readonly clock: Clock;
  /** Access tokens refused before their expiry: ended sessions, blocked or deleted accounts. */
  readonly revocations: Pick<Revocations, 'refuses'>;
}

async function resolve(
  deps: IdentityDeps,
  verifier: AccessTokenVerifier,
  request: FastifyRequest,
): Promise<PermissionVariables | undefined> {
  const token = presentedAccessToken(request);
  if (token === undefined) return undefined;
  let vars: PermissionVariables;
  try {
    vars = await verifier.verify(token, deps.clock.now());
  } catch (err) {
    if (err instanceof InvalidAccessToken) throw invalid(err.message);
    throw err;
  }
  // A signature proves who made the token, not that its session still stands: the revoked list says
  // that, from memory (see auth/revocations.ts), for every route of every instance.
  const facts = tokenFacts(vars);
  if (facts) {
    const refused = deps.revocations.refuses(facts);
    if (refused === true || (refused !== false && (await refused))) throw invalid(SESSION_ENDED);
  }
  return vars;
}

const SESSION_ENDED =
  'the session of this access token has ended (signed out, or ended by a security change)';

export const identityPlugin = fp(async (app: FastifyInstance, opts: { deps: IdentityDeps }) => {
  const cache = new WeakMap<FastifyRequest, Promise<PermissionVariables | undefined>>();
  const verifier = new AccessTokenVerifier(opts.deps.keys, opts.deps.config);
  const checkCrossSite = crossSiteCheck(opts.deps.config);
  app.decorateRequest('cookieCredential', function (this: FastifyRequest, name: string) {
    const value = signedCookie(this, name);
    if (value !== undefined) checkCrossSite(this);
    return value;
  });
  app.decorateRequest('identity', function (this: FastifyRequest) {
    let p = cache.get(this);
    if (!p) {
      p = resolve(opts.deps, verifier, this);
      cache.set(this, p);
    }
    return p;
  });
  // Reading it outside a signed-in context is a programming error, never an anonymous caller.
  const users = new WeakMap<FastifyRequest, PermissionVariables>();
  app.decorateRequest('user', {
    getter(this: FastifyRequest) {
      const who = users.get(this);
      if (!who) throw new Error('request.user is only set in a signed-in context (signedInRoutes)');
      return who;
    },
    setter(this: FastifyRequest, who: PermissionVariables) {
      users.set(this, who);
    },
  });
});

/** The contexts made signed-in by `signedInContext`. */
const signedInScopes = new WeakSet<object>();

/** Whether `scope` is a signed-in context or inside one (a child context is `Object.create(parent)`). */
export function isSignedInContext(scope: FastifyInstance): boolean {
  for (let s: object | null = scope; s !== null; s = Object.getPrototypeOf(s))
    if (signedInScopes.has(s)) return true;
  return false;
}

/** The OpenAPI security of a signed-in route: an access token (header or the cookie that holds one). */
const SIGNED_IN_SECURITY = [{ bearer: [] }];

/**
 * Makes `scope` (an encapsulated context) a signed-in one: before any of its handlers runs, the caller's
 * credential is verified (401 when absent or invalid; 403 CSRF for a cookie credential from another site,
 * see csrf.ts) and `request.user` set. It runs after the body is validated, so a malformed request is
 * still told what is wrong with it first. Every route registered here gets the bearer scheme as its
 * OpenAPI `security` (the forged-credential suite reads it to find the routes to attack); a route that
 * declares its own must include it.
 */
function signedInContext(scope: FastifyInstance): void {
  signedInScopes.add(scope);
  scope.addHook('onRoute', (route) => {
    const schema = route.schema as { security?: Record<string, unknown>[] } | undefined;
    if (schema?.security === undefined) {
      // A new object: the schema may be a module constant shared with another registration.
      route.schema = { ...route.schema, security: SIGNED_IN_SECURITY };
    } else if (!schema.security.some((s) => 'bearer' in s)) {
      throw new Error(`${route.method} ${route.url} is signed-in but its schema's security omits bearer`);
    }
  });
  scope.addHook('preHandler', async (request) => {
    const who = await request.identity();
    if (!who) throw new AppError(request.routeOptions.config.anonymousError ?? 'UNAUTHENTICATED');
    request.user = who;
  });
}

/**
 * A plugin for the routes `register` adds: a signed-in context (above), so each of them authenticates
 * its caller and is documented with the bearer scheme without saying so itself.
 */
export function signedInRoutes(register: (scope: FastifyInstance) => Promise<void>): FastifyPluginAsync {
  return async (scope) => {
    signedInContext(scope);
    await register(scope);
  };
}
