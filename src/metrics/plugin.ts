/**
 * `GET /metrics` in Prometheus' text format, and the request counters behind it. Off unless a setting
 * protects it:
 * - METRICS_TOKEN alone: served on the main port to `Authorization: Bearer <METRICS_TOKEN>` only
 *   (compared in constant time; wrong tokens count against the guess limits like a wrong admin secret);
 * - METRICS_PORT: served on that port only (METRICS_HOST), for a scraper on a private network, still
 *   asking for the token when one is set (wrong tokens count as guesses there too); the main port then
 *   has no /metrics at all. In production without a token, config.ts refuses any METRICS_HOST but a
 *   loopback one.
 * The metrics name no user, address, path or credential: routes are labelled by their pattern.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { secretsEqual } from '../constant-time.ts';
import { AppError } from '../errors.ts';
import { Metrics, type MetricsSources } from './registry.ts';

/** The guess-limit subject of metrics tokens (one token, whoever guesses). */
export const METRICS_TOKEN_SUBJECT = 'metrics-token';

const BEARER = /^Bearer +(\S+)\s*$/i;

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's metrics, when METRICS_TOKEN or METRICS_PORT turns them on. */
    metrics: Metrics | undefined;
  }
}

/** True when `authorization` carries `token` (an empty configured token lets everyone in). */
function tokenMatches(token: string, authorization: string | undefined): boolean {
  if (token === '') return true;
  const m = authorization === undefined ? null : BEARER.exec(authorization);
  return m !== null && secretsEqual(m[1] as string, token);
}

function refused(): AppError {
  return new AppError('UNAUTHENTICATED', 'GET /metrics needs "Authorization: Bearer <METRICS_TOKEN>".', {
    headers: { 'www-authenticate': 'Bearer realm="metrics"' },
  });
}

export const metricsPlugin = fp(
  async (app: FastifyInstance, opts: { config: Config; sources: MetricsSources }) => {
    const { config, sources } = opts;
    if (config.METRICS_TOKEN === '' && config.METRICS_PORT === 0) {
      app.decorate('metrics', undefined);
      return;
    }
    const metrics = new Metrics(sources);
    app.decorate('metrics', metrics);

    // A callback hook: an async one costs a promise per request.
    app.addHook('onResponse', (request, reply, done) => {
      metrics.observeRequest(
        request.method,
        request.routeOptions.url ?? 'unmatched',
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });

    if (config.METRICS_PORT === 0) {
      app.get(
        '/metrics',
        { schema: { hide: true }, config: { rateLimit: false } },
        async (request, reply) => {
          const ok = await app.guesses.guard(METRICS_TOKEN_SUBJECT, request.ip, () =>
            tokenMatches(config.METRICS_TOKEN, request.headers.authorization),
          );
          if (!ok) throw refused();
          reply.header('cache-control', 'no-store').type(metrics.contentType);
          return metrics.text();
        },
      );
      app.addHook('onClose', async () => metrics.close());
      return;
    }

    const server = separateListener(metrics, config.METRICS_TOKEN, app);
    app.addHook('onReady', async () => {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.METRICS_PORT, config.METRICS_HOST, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const where = server.address() as AddressInfo;
      const guarded = config.METRICS_TOKEN !== '';
      app.log.info(
        { metrics: `${where.address}:${where.port}`, token: guarded },
        guarded
          ? 'metrics served on their own port, to the holder of METRICS_TOKEN'
          : `metrics served on their own port without a token, to whoever reaches ${where.address}`,
      );
    });
    app.addHook('onClose', async () => {
      metrics.close();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    });
  },
  { name: 'gatehouse-metrics' },
);

/** The METRICS_PORT server: `GET /metrics` and nothing else. */
function separateListener(metrics: Metrics, token: string, app: FastifyInstance): Server {
  const log = app.log;
  const send = (res: ServerResponse, status: number, type: string, body: string, extra = {}) => {
    res.writeHead(status, {
      'content-type': type,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      ...extra,
    });
    res.end(body);
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD'))
      return send(res, 404, 'text/plain; charset=utf-8', 'Not Found\n');
    // A wrong token is a guess at it, from the connecting address (no proxy is believed on this port).
    app.guesses
      .guard(METRICS_TOKEN_SUBJECT, req.socket.remoteAddress ?? '', () =>
        tokenMatches(token, req.headers.authorization),
      )
      .then(
        async (ok) => {
          if (!ok)
            return send(res, 401, 'text/plain; charset=utf-8', 'GET /metrics needs the metrics token\n', {
              'www-authenticate': 'Bearer realm="metrics"',
            });
          const text = await metrics.text().catch((err: unknown) => {
            log.error({ err }, 'metrics could not be collected');
            return undefined;
          });
          if (text === undefined)
            return send(res, 500, 'text/plain; charset=utf-8', 'metrics could not be collected\n');
          send(res, 200, metrics.contentType, req.method === 'HEAD' ? '' : text);
        },
        (err: unknown) => {
          if (err instanceof AppError && err.statusCode === 429)
            return send(res, 429, 'text/plain; charset=utf-8', `${err.message}\n`, err.headers);
          log.error({ err }, 'the metrics token could not be checked');
          send(res, 500, 'text/plain; charset=utf-8', 'the metrics token could not be checked\n');
        },
      );
  });
  // Scrapers keep connections open; they must not hold a shutdown.
  server.keepAliveTimeout = 5_000;
  return server;
}
