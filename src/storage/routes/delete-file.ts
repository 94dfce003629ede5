/**
 * DELETE /storage/o/<file>: 204; 404 when there is no such file (HBP answered a bare 400, contract D25).
 */
import type { FastifyInstance } from 'fastify';
import { deleteFile } from '../service.ts';
import { callerOf, errors, KeyParams, keyOf, type StorageRouteDeps, security, TokenQuery } from './common.ts';

const schema = {
  summary: 'Delete a file',
  description: 'Rules: `delete`/`write`.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 204: { type: 'null', description: 'Deleted' }, ...errors(400, 401, 403, 404, 503) },
};

export async function deleteFileRoute(
  app: FastifyInstance,
  { deps }: { deps: StorageRouteDeps },
): Promise<void> {
  app.delete('/o/*', { schema }, async (request, reply) => {
    const key = keyOf(request);
    await deleteFile(deps, key, await callerOf(request, deps.config));
    await deps.images.forget(key.key);
    return reply.code(204).send();
  });
}
