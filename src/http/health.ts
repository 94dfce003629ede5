import { readFileSync } from 'node:fs';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Database } from '../db/database.ts';
import { ErrorBodySchema, errorBody } from '../errors.ts';

/** Extra readiness checks that features register (the object store, for instance). */
export type ReadinessCheck = { name: string; check: () => Promise<void> };

/**
 * How long a readiness check may take before its dependency counts as down: a load balancer probes
 * often and with a short timeout of its own, and a blackholed host would otherwise hold the probe for
 * the whole connect timeout.
 */
const CHECK_TIMEOUT_MS = 2_000;

/** Resolves as `what` does, or rejects after `ms`. */
async function within(ms: number, what: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      what(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export const healthRoutes: FastifyPluginAsyncTypebox<{ db: Database; checks: ReadinessCheck[] }> = async (
  app,
  opts,
) => {
  const hide = { hide: false, tags: ['health'] };
  app.get(
    '/health',
    {
      schema: {
        ...hide,
        summary: 'Liveness (204, no body)',
        response: { 204: Type.Null({ description: 'The process is up.' }) },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => reply.code(204).send(null),
  );
  app.get(
    '/healthz',
    {
      schema: {
        ...hide,
        summary: 'Liveness, HBP form (200 OK)',
        response: { 200: Type.String({ description: 'The text `OK`.' }) },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => reply.type('text/plain; charset=utf-8').send('OK'),
  );
  app.get(
    '/health/ready',
    {
      schema: {
        ...hide,
        summary: 'Readiness: 204 when the database and object store answer (each within 2 s), else 503',
        response: {
          204: Type.Null({ description: 'Every dependency answers.' }),
          503: { ...ErrorBodySchema, description: 'A dependency is down; the message names it.' },
        },
      },
      config: { rateLimit: false },
    },
    async (request, reply) => {
      const checks: ReadinessCheck[] = [{ name: 'database', check: () => opts.db.ping() }, ...opts.checks];
      const failed: string[] = [];
      await Promise.all(
        checks.map(async (c) => {
          try {
            await within(CHECK_TIMEOUT_MS, c.check);
          } catch (err) {
            // The database's outage is logged once by its watcher (db/availability.ts), not per probe.
            request.log[c.name === 'database' ? 'debug' : 'warn'](
              { err, check: c.name },
              'readiness check failed',
            );
            failed.push(c.name);
          }
        }),
      );
      if (failed.length === 0) return reply.code(204).send(null);
      return reply
        .code(503)
        .header('retry-after', '5')
        .send(
          errorBody(
            503,
            'SERVICE_UNAVAILABLE',
            `Unavailable: ${failed.sort().join(', ')}.`,
            String(request.id),
          ),
        );
    },
  );
  const pkg: { version: string } = JSON.parse(
    readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
  );
  const version = { version: `v${pkg.version}` };
  app.get(
    '/version',
    {
      schema: {
        ...hide,
        summary: 'Service version',
        response: {
          200: Type.Object(
            { version: Type.String() },
            { description: 'The running version.', additionalProperties: false },
          ),
        },
      },
    },
    async () => version,
  );
};
