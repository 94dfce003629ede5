/**
 * Response headers every answer carries, and CORS. CORS reflects only allowed origins (HBP reflected any
 * origin with credentials, so any site could act as a signed-in user).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import helmet from 'helmet';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { originMatcher } from './url-patterns.ts';

/** Outside production, with CORS_ORIGINS unset: the developer's own machine, on any port. */
const LOCALHOST = ['localhost', '127.0.0.1', '[::1]'].flatMap((h) => [`http://${h}:*`, `https://${h}:*`]);

/**
 * The origins allowed to call with credentials: CORS_ORIGINS, or when it is unset any localhost origin
 * outside production and none in production. CORS and the CSRF check (csrf.ts) share it, and both match
 * with the matcher redirects use (url-patterns.ts).
 */
export function corsOriginAllowed(config: Config): (origin: string) => boolean {
  if (config.CORS_ORIGINS.length > 0) return originMatcher(config.CORS_ORIGINS);
  return config.isProduction ? () => false : originMatcher(LOCALHOST);
}

/** Response headers as `[name, value]` pairs, names spelled as helmet spells them. */
export type SecurityHeaders = ReadonlyArray<readonly [string, string]>;

/**
 * helmet's headers for this configuration, computed once. Its middleware is run a single time against a
 * stand-in response that records what it sets: every header it sets here is a constant (no directive
 * depends on the request), so setting the list on each answer sends the same bytes as running helmet on
 * each request, without a middleware chain per request. helmet's only other action, removing
 * X-Powered-By, has nothing to remove: neither Fastify nor Node sets that header.
 */
export function securityHeaders(config: Config): SecurityHeaders {
  const middleware = helmet({
    // An API answers JSON and files; nothing it sends should run scripts or be framed.
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], sandbox: [] },
    },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    hsts: config.isProduction ? { maxAge: 15552000, includeSubDomains: true } : false,
  });
  const headers: [string, string][] = [];
  const recorder = {
    setHeader(name: string, value: unknown) {
      const lower = name.toLowerCase();
      const at = headers.findIndex(([n]) => n.toLowerCase() === lower);
      if (at >= 0) headers.splice(at, 1);
      headers.push([name, String(value)]);
    },
    removeHeader() {},
  };
  let finished = false;
  middleware({} as IncomingMessage, recorder as unknown as ServerResponse, (err?: unknown) => {
    if (err) throw err;
    finished = true;
  });
  // helmet's middlewares are synchronous; a later version that is not would leave the list incomplete.
  if (!finished) throw new Error('helmet did not finish synchronously; securityHeaders needs revisiting');
  return Object.freeze(headers.map(([n, v]) => Object.freeze([n, v] as const)));
}

/** Sets the headers on a response that has not started yet. */
export function setSecurityHeaders(res: ServerResponse, headers: SecurityHeaders): void {
  for (const [name, value] of headers) res.setHeader(name, value);
}

/**
 * The security headers on every answer that goes through a route (404s included) and CORS. Answers
 * that never reach a route (routing errors, malformed HTTP) get the same headers from the error
 * handlers in `error-handler.ts`.
 */
export async function installSecurity(
  app: FastifyInstance,
  config: Config,
  headers: SecurityHeaders = securityHeaders(config),
): Promise<void> {
  // Set on the raw response, as helmet did, so that the header names keep helmet's spelling on the wire.
  app.addHook('onRequest', (_request, reply, done) => {
    setSecurityHeaders(reply.raw, headers);
    done();
  });

  const allowed = corsOriginAllowed(config);
  // @fastify/cors answers an OPTIONS request from a trusted origin without Access-Control-Request-Method
  // (not a preflight) with a plain-text 400; the fuzzer found it. The same refusal, in the error body
  // every other route uses, is made here first.
  app.addHook('onRequest', (request, _reply, done) => {
    const origin = request.headers.origin;
    if (
      request.method === 'OPTIONS' &&
      origin !== undefined &&
      request.headers['access-control-request-method'] === undefined &&
      (allowed(origin) || OPEN_TO_ANY_ORIGIN.has(pathOf(request.url)))
    )
      done(
        new AppError(
          'BAD_REQUEST',
          'An OPTIONS request from a browser origin is a CORS preflight: send Access-Control-Request-Method.',
        ),
      );
    else done();
  });
  const forAnyOrigin: cors.FastifyCorsOptions = {
    origin: '*',
    credentials: false,
    methods: ['GET', 'POST', 'OPTIONS'],
    allowedHeaders: ['authorization', 'content-type', 'mcp-protocol-version', 'x-request-id'],
    exposedHeaders: ['www-authenticate', 'retry-after', 'x-request-id'],
    maxAge: 600,
  };
  const forAllowedOrigins: cors.FastifyCorsOptions = {
    origin: (origin, cb) => cb(null, origin !== undefined && allowed(origin)),
    credentials: true,
    // PATCH: the admin API's changes (PATCH /admin/users/{id}) and resumable uploads' chunks (TUS).
    methods: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE', 'OPTIONS'],
    allowedHeaders: [
      'authorization',
      'content-type',
      'x-admin-secret',
      'x-hasura-admin-secret',
      'x-request-id',
      'range',
      'if-none-match',
      'if-modified-since',
      // Resumable uploads (TUS, /storage/uploads).
      'tus-resumable',
      'upload-length',
      'upload-offset',
      'upload-metadata',
      'upload-checksum',
    ],
    exposedHeaders: [
      'etag',
      'content-range',
      'accept-ranges',
      'content-disposition',
      'retry-after',
      'x-request-id',
      'location',
      'tus-resumable',
      'tus-version',
      'tus-extension',
      'tus-max-size',
      'tus-checksum-algorithm',
      'upload-offset',
      'upload-length',
      'upload-metadata',
      'upload-expires',
    ],
    maxAge: 600,
  };
  await app.register(cors, {
    delegator: (request, cb) =>
      cb(null, OPEN_TO_ANY_ORIGIN.has(pathOf(request.url)) ? forAnyOrigin : forAllowedOrigins),
  });
}

/**
 * What browser-based OAuth clients call from their own origin, which no operator can list in advance
 * (clients register themselves: DCR, metadata documents): discovery, the keys, the token exchange,
 * revocation, registration and userinfo. They answer any origin, never with credentials: nothing there
 * reads a cookie (a code with its PKCE verifier, a refresh token or a bearer token is the proof), so a
 * page can learn nothing it did not send; a browser-based client (the IETF's OAuth 2.0 for Browser-Based
 * Applications) cannot work without it. Everything else keeps the allowed origins and credentials.
 */
const OPEN_TO_ANY_ORIGIN = new Set([
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
  '/auth/jwks',
  '/auth/oauth2/token',
  '/auth/oauth2/revoke',
  '/auth/oauth2/register',
  '/auth/oauth2/userinfo',
]);

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** HBP's `nocache` headers, on every /auth answer. */
export const NO_CACHE_HEADERS = {
  'cache-control': 'no-store, no-cache, must-revalidate, proxy-revalidate',
  pragma: 'no-cache',
  expires: '0',
  'surrogate-control': 'no-store',
} as const;
