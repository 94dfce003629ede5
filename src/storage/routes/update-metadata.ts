/**
 * POST /storage/m/<file> `{"action": "revoke-token"}`: a new file token. Only the admin secret may do this;
 * rules are not consulted (as in HBP).
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { revokeTokenAsAdmin, toMetadata } from '../service.ts';
import {
  callerOf,
  errors,
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
  response: { 200: FileMetadataSchema, ...errors(400, 403, 404, 503) },
};

export async function updateMetadataRoute(
  app: FastifyInstance,
  { deps }: { deps: StorageRouteDeps },
): Promise<void> {
  app.post('/m/*', { schema }, async (request) => {
    const info = await revokeTokenAsAdmin(deps, keyOf(request), await callerOf(request, deps.config));
    return toMetadata(info);
  });
}
