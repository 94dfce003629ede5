/**
 * buildApp: the Fastify instance with its plugins and route groups, for a given AppContext. It never
 * listens; `main.ts` does, and tests use `inject` or listen on port 0.
 */
import { randomUUID } from 'node:crypto';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyServerOptions, type RouteOptions } from 'fastify';
import { authRoutes } from './auth/routes/index.ts';
import type { AppContext } from './context.ts';
import { AppError } from './errors.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/error-handler.ts';
import { healthRoutes, type ReadinessCheck } from './http/health.ts';
import { identityPlugin } from './http/identity.ts';
import { rateLimitPlugin } from './http/rate-limit.ts';
import { installSecurity, NO_CACHE_HEADERS, securityHeaders } from './http/security.ts';
import { validatorCompiler } from './http/validation.ts';
import { storageRoutes } from './storage/routes/index.ts';

export interface BuildOptions {
  /** A pino logger to use, or false for none (tests). Default: a new logger at LOG_LEVEL. */
  logger?: FastifyBaseLogger | false;
  /** Sees every route as it is registered (tests compare the routes with /openapi.json). */
  onRoute?: (route: RouteOptions) => void;
}

export const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-admin-secret"]',
  'res.headers["set-cookie"]',
];
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export async function buildApp(ctx: AppContext, opts: BuildOptions = {}) {
  const { config } = ctx;
  const loggerOpts: Pick<FastifyServerOptions, 'logger'> & { loggerInstance?: FastifyBaseLogger } =
    opts.logger === false
      ? { logger: false }
      : opts.logger
        ? { loggerInstance: opts.logger }
        : { logger: { level: config.LOG_LEVEL, redact: REDACT } };
  const headers = securityHeaders(config);
  const app = Fastify({
    ...loggerOpts,
    bodyLimit: config.BODY_LIMIT,
    // proxy-addr accepts a hop count; Fastify's types omit it.
    trustProxy: parseTrustProxy(config.TRUST_PROXY) as boolean,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, caseSensitive: true },
    // Requests that arrive while closing are refused by the hook below, with the usual headers and body.
    return503OnClosing: false,
    frameworkErrors: frameworkErrors(headers),
    clientErrorHandler: clientErrorHandler(headers),
    forceCloseConnections: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  if (opts.onRoute) app.addHook('onRoute', opts.onRoute);
  app.setValidatorCompiler(validatorCompiler);
  installErrorHandling(app);
  // A callback hook: an async one costs a promise per request for a single header.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Gatehouse',
        version: '0.1.0',
        description:
          'Authentication and file storage for PostgreSQL + GraphQL apps (hasura-backend-plus v2 compatible).',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          adminSecret: { type: 'apiKey', in: 'header', name: 'x-admin-secret' },
        },
      },
    },
  });
  await installSecurity(app, config, headers);

  // While the app closes (a graceful stop), requests that still arrive on open keep-alive connections are
  // refused with 503 and `connection: close`. The hook runs after the security headers and CORS (so a
  // browser can read the answer) and before anything that would use the services being closed.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!closing) return done();
    done(
      new AppError('SHUTTING_DOWN', undefined, {
        headers: { connection: 'close' },
      }),
    );
  });
  await app.register(cookie, { secret: ctx.cookieSecret });
  await app.register(identityPlugin, { ctx });
  await app.register(rateLimitPlugin, { ctx });

  const readiness: ReadinessCheck[] = [];
  await app.register(healthRoutes, { ctx, checks: readiness });

  if (config.AUTH_ENABLED) {
    await app.register(
      async (auth) => {
        auth.addHook('onSend', async (_req, reply) => {
          reply.headers(NO_CACHE_HEADERS);
        });
        await auth.register(authRoutes, { ctx });
      },
      { prefix: '/auth' },
    );
  }
  if (config.STORAGE_ENABLED) {
    await app.register(storageRoutes, { ctx, readiness, prefix: '/storage' });
  }

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  return app;
}

function parseTrustProxy(v: string): boolean | number | string[] {
  if (v === 'true') return true;
  if (v === 'false' || v === '') return false;
  if (/^\d+$/.test(v)) return Number(v);
  return v.split(',').map((s) => s.trim());
}
