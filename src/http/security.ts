/**
 * Response headers every answer carries, and CORS. CORS reflects only allowed origins (HBP reflected any
 * origin with credentials, so any site could act as a signed-in user).
 */
import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import helmet from 'helmet';
import type { Config } from '../config.ts';

/** Case-insensitive patterns where `*` matches runs of `star` (a regex class); everything else is literal. */
function patternMatcher(patterns: readonly string[], star: string): (value: string) => boolean {
  const res = patterns.map(
    (p) =>
      new RegExp(
        `^${p
          .split('*')
          .map((s) => s.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
          .join(star)}$`,
        'i',
      ),
  );
  return (value) => res.some((re) => re.test(value));
}

/** `*` matches any run of characters within the pattern; everything else is literal. */
export function wildcardMatcher(patterns: readonly string[]): (value: string) => boolean {
  return patternMatcher(patterns, '.*');
}

/**
 * For CORS: like `wildcardMatcher`, but `*` matches only host-name characters (letters, digits, `-`,
 * `.`), so `https://*.example.com` or `http://localhost:*` can never match across a `:` or `/`.
 */
export function originMatcher(patterns: readonly string[]): (origin: string) => boolean {
  return patternMatcher(patterns, '[A-Za-z0-9.-]*');
}

const LOCALHOST = /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/i;

export async function installSecurity(app: FastifyInstance, config: Config): Promise<void> {
  // helmet's middleware, built once: @fastify/helmet rebuilt it (parsing the CSP directives again) on
  // every request, a tenth of a metadata request's CPU. The headers are the same, set the same way.
  const securityHeaders = helmet({
    // An API answers JSON and files; nothing it sends should run scripts or be framed.
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], sandbox: [] },
    },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    hsts: config.isProduction ? { maxAge: 15552000, includeSubDomains: true } : false,
  });
  const failed = (err?: unknown) => {
    // helmet's middlewares only set headers and never call back with an error.
    if (err) throw err;
  };
  app.addHook('onRequest', (request, reply, done) => {
    securityHeaders(request.raw, reply.raw, failed);
    done();
  });

  const allowed =
    config.CORS_ORIGINS.length > 0
      ? originMatcher(config.CORS_ORIGINS)
      : config.isProduction
        ? () => false
        : (o: string) => LOCALHOST.test(o);
  await app.register(cors, {
    origin: (origin, cb) => cb(null, origin !== undefined && allowed(origin)),
    credentials: true,
    methods: ['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS'],
    allowedHeaders: [
      'authorization',
      'content-type',
      'x-admin-secret',
      'x-request-id',
      'range',
      'if-none-match',
      'if-modified-since',
    ],
    exposedHeaders: [
      'etag',
      'content-range',
      'accept-ranges',
      'content-disposition',
      'retry-after',
      'x-request-id',
    ],
    maxAge: 600,
  });
}

/** HBP's `nocache` headers, on every /auth answer. */
export const NO_CACHE_HEADERS = {
  'cache-control': 'no-store, no-cache, must-revalidate, proxy-revalidate',
  pragma: 'no-cache',
  expires: '0',
  'surrogate-control': 'no-store',
} as const;
