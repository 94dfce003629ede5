/**
 * buildApp: the Fastify instance with its plugins and route groups, for a given AppContext. It never
 * listens; `main.ts` does, and tests use `inject` or listen on port 0.
 */
import { randomUUID } from 'node:crypto';
import cookie from '@fastify/cookie';
import swagger, { type SwaggerOptions } from '@fastify/swagger';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyServerOptions,
  type RouteOptions,
} from 'fastify';
import { adminRoutes } from './admin/routes/index.ts';
import { authRoutes } from './auth/routes/index.ts';
import type { TrustProxy } from './config.ts';
import { consoleRoutes } from './console/plugin.ts';
import { type AppContext, authDeps } from './context.ts';
import { AppError } from './errors.ts';
import { registerApiReference } from './http/api-reference.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/error-handler.ts';
import { healthRoutes, type ReadinessCheck } from './http/health.ts';
import { identityPlugin } from './http/identity.ts';
import { createLogger } from './http/logging.ts';
import { rateLimitPlugin } from './http/rate-limit.ts';
import { installSecurity, NO_CACHE_HEADERS, securityHeaders } from './http/security.ts';
import {
  gate,
  keepSwitchedOff,
  mergePaths,
  notServed,
  type OpenApiPaths,
  registerWhen,
  switchedOffPaths,
} from './http/switched-off.ts';
import { validatorCompiler } from './http/validation.ts';
import { outboxDir } from './mail/mailer.ts';
import { metricsPlugin } from './metrics/plugin.ts';
import type { StorageRouteDeps } from './storage/routes/common.ts';
import { storageRoutes } from './storage/routes/index.ts';

export interface BuildOptions {
  /**
   * A pino logger to use (built with http/logging.ts's options, which keep secrets out of it), or false
   * for none (tests). Default: a new such logger at LOG_LEVEL.
   */
  logger?: FastifyBaseLogger | false;
  /** Sees every route as it is registered (tests compare the routes with /openapi.json). */
  onRoute?: (route: RouteOptions) => void;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export async function buildApp(ctx: AppContext, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const { config } = ctx;
  const loggerOpts: Pick<FastifyServerOptions, 'logger'> & { loggerInstance?: FastifyBaseLogger } =
    opts.logger === false
      ? { logger: false }
      : opts.logger
        ? { loggerInstance: opts.logger }
        : { loggerInstance: createLogger(config.LOG_LEVEL) as unknown as FastifyBaseLogger };
  const headers = securityHeaders(config);
  const app: FastifyInstance = Fastify({
    ...loggerOpts,
    bodyLimit: config.BODY_LIMIT,
    trustProxy: trustProxyOption(config.TRUST_PROXY),
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
  });

  if (opts.onRoute) app.addHook('onRoute', opts.onRoute);
  warnUntrustedForwarding(app);
  app.setValidatorCompiler(validatorCompiler);
  installErrorHandling(app);
  // An empty body labelled JSON is no body, as when the label is absent: clients send
  // `content-type: application/json` on every POST, including those of routes that need no body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (String(body).trim() === '') return done(null, undefined);
    void parseJson(request, body as string, done);
  });
  // A callback hook: an async one costs a promise per request for a single header.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });

  // Routes switched off by a setting are listed too, marked (http/switched-off.ts); filled once the
  // route groups are registered, before the document is first asked for.
  let off: OpenApiPaths = { paths: {} };
  const openapi: SwaggerOptions = {
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
          hasuraAdminSecret: { type: 'apiKey', in: 'header', name: 'x-hasura-admin-secret' },
        },
      },
    },
  };
  await app.register(swagger, {
    ...openapi,
    transformObject: (doc) =>
      'openapiObject' in doc ? mergePaths(doc.openapiObject as OpenApiPaths, off) : doc.swaggerObject,
  });
  keepSwitchedOff(app);
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
  await app.register(identityPlugin, {
    deps: { config, keys: ctx.keys, clock: ctx.clock, revocations: ctx.revocations },
  });
  const readiness: ReadinessCheck[] = [];
  await app.register(rateLimitPlugin, { config, counters: ctx.counters, readiness });
  await app.register(metricsPlugin, {
    config,
    sources: {
      passwords: ctx.passwords,
      outbox: ctx.outbox.sends ? ctx.outbox : undefined,
      poolStats: ctx.db.poolStats?.bind(ctx.db),
      revocations: ctx.revocations,
      images: ctx.storage?.images,
    },
  });

  await app.register(healthRoutes, { db: ctx.db, checks: readiness });

  {
    const authGroup: FastifyPluginAsync = async (auth) => {
      auth.addHook('onSend', async (_req, reply) => {
        // A route that declares its answer public (the JWKS) keeps that; everything else is no-store.
        const declared = reply.getHeader('cache-control');
        if (reply.statusCode === 200 && typeof declared === 'string' && declared.startsWith('public,'))
          return;
        reply.headers(NO_CACHE_HEADERS);
      });
      await auth.register(authRoutes, { deps: authDeps(ctx), mfaBox: ctx.mfaBox, providers: ctx.providers });
    };
    await registerWhen(app, gate(config, { AUTH_ENABLED: true }), (s) =>
      s.register(authGroup, { prefix: '/auth' }),
    );
  }
  // The admin API works on the accounts of the auth group: served when it is.
  await registerWhen(app, gate(config, { AUTH_ENABLED: true }), (s) =>
    s.register(adminRoutes, { deps: authDeps(ctx), prefix: '/admin' }),
  );
  if (ctx.storage) {
    const { objects, rules, images, catalog, tus } = ctx.storage;
    readiness.push({ name: 'storage', check: () => objects.ping() });
    await app.register(storageRoutes, {
      deps: {
        config,
        db: ctx.db,
        clock: ctx.clock,
        objects,
        rules,
        images,
        catalog,
        tus,
        webhooks: ctx.webhooks,
      },
      prefix: '/storage',
    });
  } else {
    await registerWhen(app, gate(config, { STORAGE_ENABLED: true }), (s) =>
      s.register(storageRoutes, {
        deps: {
          config,
          db: ctx.db,
          clock: ctx.clock,
          catalog: notServed<StorageRouteDeps['catalog']>('the files table'),
          objects: notServed<StorageRouteDeps['objects']>('the object store'),
          rules: notServed<StorageRouteDeps['rules']>('the storage rules'),
          images: notServed<StorageRouteDeps['images']>('the image transforms'),
        },
        prefix: '/storage',
      }),
    );
  }

  if (config.CONSOLE_ENABLED) {
    await app.register(consoleRoutes, {
      config,
      outboxDir: ctx.mailer.mode === 'outbox' ? outboxDir(config) : undefined,
      db: ctx.db,
      rules: ctx.storage?.rules,
      prefix: '/console',
    });
  }

  if (config.CONSOLE_ENABLED && !config.isProduction) {
    // A newcomer opens the address the start log names: outside production that is the console. In
    // production `/` stays the JSON 404 an API answers (the console there is for the admin only).
    app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/console/', 302));
  }
  off = await switchedOffPaths(app, openapi);
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  if (config.API_REFERENCE_ENABLED) await registerApiReference(app);
  return app;
}

/**
 * Fastify's `trustProxy` for TRUST_PROXY. Fastify takes a bare number as "trust nothing" (a hop count
 * cannot check who connects), so a hop count is given as a function: the nearest n hops are believed,
 * whatever their address, as Express does; docs/auth.md ("Rate limits") says when that is safe.
 */
function trustProxyOption(v: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof v === 'number') return (_address, hop) => hop < v;
  return typeof v === 'boolean' ? v : [...v];
}

/**
 * Logs once when a peer that is not a trusted proxy sends X-Forwarded-For: behind a load balancer that
 * TRUST_PROXY does not name, every client would share the balancer's address in the rate limits.
 */
function warnUntrustedForwarding(app: FastifyInstance): void {
  let warned = false;
  app.addHook('onRequest', (request, _reply, done) => {
    if (!warned && request.headers['x-forwarded-for'] !== undefined && (request.ips?.length ?? 0) < 2) {
      warned = true;
      request.log.warn(
        { peer: request.socket.remoteAddress },
        'X-Forwarded-For from a peer that TRUST_PROXY does not name was ignored; if that peer is your load balancer or proxy, set TRUST_PROXY to its addresses, or every client shares its address in rate limits',
      );
    }
    done();
  });
}
