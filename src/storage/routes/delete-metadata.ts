/**
 * DELETE /storage/m/<file>: rotates the file token (HBP replaced the metadata with a new token), so links
 * carrying the old `?token=` stop working.
 */
import type { FastifyInstance } from 'fastify';
import { rotateTokenByRules } from '../service.ts';
import { callerOf, errors, KeyParams, keyOf, type StorageRouteDeps, security, TokenQuery } from './common.ts';

const schema = {
  summary: 'Rotate the file token',
  description: 'Rules: `delete`/`write`.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 204: { type: 'null', description: 'Token replaced' }, ...errors(400, 401, 403, 404, 503) },
};

export async function deleteMetadataRoute(
  app: FastifyInstance,
  { deps }: { deps: StorageRouteDeps },
): Promise<void> {
  app.delete('/m/*', { schema }, async (request, reply) => {
    await rotateTokenByRules(deps, keyOf(request), await callerOf(request, deps.config));
    return reply.code(204).send();
  });
}
