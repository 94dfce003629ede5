/**
 * DELETE /storage/o/<file>: 204; 404 when there is no such file (HBP answered a bare 400, contract D25).
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { deleteFile } from '../service.ts';
import { callerOf, depsOf, errors, KeyParams, keyOf, security, TokenQuery } from './common.ts';

const schema = {
  summary: 'Delete a file',
  description: 'Rules: `delete`/`write`.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 204: { type: 'null', description: 'Deleted' }, ...errors(400, 401, 403, 404, 503) },
};

export async function deleteFileRoute(app: FastifyInstance, opts: { ctx: AppContext }): Promise<void> {
  const deps = depsOf(opts.ctx);
  app.delete('/o/*', { schema }, async (request, reply) => {
    const key = keyOf(request);
    await deleteFile(deps, key, await callerOf(request, deps.config));
    await opts.ctx.storage?.images.forget(key.key);
    return reply.code(204).send();
  });
}
