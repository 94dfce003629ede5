/**
 * DELETE /storage/o/<file>: 204; 404 when there is no such file (HBP answered a bare 400, contract D25).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { deleteFile } from '../service.ts';
import { callerOf, KeyParams, keyOf, type StorageRouteDeps, security, TokenQuery } from './common.ts';

const schema = {
  summary: 'Delete a file',
  description: 'Rules: `delete`/`write`.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 401, 403, 404, 503) },
};

export const deleteFileRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (
  app,
  { deps },
) => {
  app.delete('/o/*', { schema }, async (request, reply) => {
    await deleteFile(deps, keyOf(request), await callerOf(request, request.query, deps.config));
    return reply.code(204).send(null);
  });
};
