/**
 * DELETE /storage/m/<file>: rotates the file token (HBP replaced the metadata with a new token), so links
 * carrying the old `?token=` stop working.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { rotateTokenByRules } from '../service.ts';
import { callerOf, KeyParams, keyOf, type StorageRouteDeps, security, TokenQuery } from './common.ts';

const schema = {
  summary: 'Rotate the file token',
  description: 'Rules: `delete`/`write`.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: {
    204: Type.Null({ description: 'Token replaced' }),
    ...errorResponses(400, 401, 403, 404, 503),
  },
};

export const deleteMetadataRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (
  app,
  { deps },
) => {
  app.delete('/m/*', { schema }, async (request, reply) => {
    await rotateTokenByRules(deps, keyOf(request), await callerOf(request, request.query, deps.config));
    return reply.code(204).send(null);
  });
};
