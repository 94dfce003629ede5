import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.ts';
import { ErrorBodySchema, errorBody } from '../errors.ts';

/** Extra readiness checks that features register (the object store, for instance). */
export type ReadinessCheck = { name: string; check: () => Promise<void> };

export async function healthRoutes(app: FastifyInstance, opts: { db: Database; checks: ReadinessCheck[] }) {
  const hide = { hide: false, tags: ['health'] };
  app.get(
    '/health',
    {
      schema: {
        ...hide,
        summary: 'Liveness (204, no body)',
        response: { 204: { description: 'The process is up.', type: 'null' } },
      },
      config: { rateLimit: false },
    },
    async (_req, reply) => reply.code(204).send(),
  );
  app.get(
    '/healthz',
    {
      schema: {
        ...hide,
        summary: 'Liveness, HBP form (200 OK)',
        response: { 200: { description: 'The text `OK`.', type: 'string' } },
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
        summary: 'Readiness: 204 when the database and object store answer, else 503',
        response: {
          204: { description: 'Every dependency answers.', type: 'null' },
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
            await c.check();
          } catch (err) {
            request.log.warn({ err, check: c.name }, 'readiness check failed');
            failed.push(c.name);
          }
        }),
      );
      if (failed.length === 0) return reply.code(204).send();
      return reply
        .code(503)
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
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  const version = { version: `v${pkg.version}` };
  app.get(
    '/version',
    {
      schema: {
        ...hide,
        summary: 'Service version',
        response: {
          200: {
            description: 'The running version.',
            type: 'object',
            properties: { version: { type: 'string' } },
            required: ['version'],
            additionalProperties: false,
          },
        },
      },
    },
    async () => version,
  );
}
