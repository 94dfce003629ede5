/**
 * POST /storage/m/<file> `{"action": "revoke-token"}`: a new file token. Only the admin secret may do this;
 * rules are not consulted (as in HBP).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { revokeTokenAsAdmin, toMetadata } from '../service.ts';
import {
  callerOf,
  FileMetadataSchema,
  KeyParams,
  keyOf,
  type StorageRouteDeps,
  TokenQuery,
} from './common.ts';

const schema = {
  summary: 'Revoke the file token (admin secret only)',
  tags: ['storage'],
  security: [{ adminSecret: [] }],
  params: KeyParams,
  querystring: TokenQuery,
  body: Type.Object({ action: Type.Literal('revoke-token') }, { additionalProperties: false }),
  response: { 200: FileMetadataSchema, ...errorResponses(400, 403, 404, 503) },
};

export const updateMetadataRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (
  app,
  { deps },
) => {
  app.post('/m/*', { schema }, async (request) => {
    const info = await revokeTokenAsAdmin(
      deps,
      keyOf(request),
      await callerOf(request, request.query, deps.config),
    );
    return toMetadata(info);
  });
};
