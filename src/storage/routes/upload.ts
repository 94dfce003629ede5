/**
 * POST /storage/o/<file>: upload. The file comes as the multipart part `file` (HBP's encoding) or as the
 * raw body with its Content-Type; either way it streams into the store and is never held in memory.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorResponses } from '../../errors.ts';
import { toMetadata } from '../service.ts';
import { uploadFile } from '../upload.ts';
import {
  callerOf,
  FileMetadataSchema,
  KeyParams,
  keyOf,
  type StorageRouteDeps,
  security,
  TokenQuery,
} from './common.ts';
import { incomingFile, readIncomingFiles } from './incoming-file.ts';

const schema = {
  summary: 'Upload a file (multipart part "file", or the raw body)',
  description:
    'Creates or overwrites the file. An overwrite keeps the file token. Rules: `create`/`write` for a new file, `update`/`write` for an existing one.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 200: FileMetadataSchema, ...errorResponses(400, 401, 403, 404, 413, 503) },
};

export const uploadRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  // This scope reads bodies itself (incoming-file.ts).
  await readIncomingFiles(app, deps.config.STORAGE_MAX_UPLOAD_SIZE);

  app.post('/o/*', { schema }, async (request, reply) => {
    const key = keyOf(request);
    const caller = await callerOf(request, request.query, deps.config);
    const incoming = await incomingFile(request);
    try {
      const info = await uploadFile(deps, key, caller, incoming.file);
      return reply.code(200).send(toMetadata(info));
    } finally {
      incoming.release();
    }
  });
};
