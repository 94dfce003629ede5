/**
 * GET /storage/m/<file>: the file's metadata. GET /storage/m/<folder>/: the metadata of every file in the
 * folder (recursively, all pages) the caller may list.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { type FileMetadata, listFolder, resolveFile, toMetadata } from '../service.ts';
import {
  callerOf,
  FileMetadataSchema,
  KeyParams,
  keyOf,
  type StorageRouteDeps,
  security,
  TokenQuery,
} from './common.ts';

const schema = {
  summary: 'File metadata, or the metadata of every file in a folder (path ending in "/")',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: {
    200: Type.Union([FileMetadataSchema, Type.Array(FileMetadataSchema)]),
    ...errorResponses(400, 401, 403, 404, 503),
  },
};

const FolderSchema = Type.Array(FileMetadataSchema);

function inByteOrder(files: FileMetadata[]): boolean {
  for (let i = 1; i < files.length; i++) {
    const a = (files[i - 1] as FileMetadata).key;
    const b = (files[i] as FileMetadata).key;
    if (Buffer.compare(Buffer.from(a), Buffer.from(b)) > 0) return false;
  }
  return true;
}

export const getMetadataRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (
  app,
  { deps },
) => {
  app.get('/m/*', { schema }, async (request, reply) => {
    const key = keyOf(request);
    const caller = await callerOf(request, request.query, deps.config);
    if (!key.folder) {
      const meta = toMetadata((await resolveFile(deps, key, caller)).info);
      // The 200 schema is a union (file or folder), which the serializer can only pick by validating the
      // body against each branch on every request; a file's answer is the first branch, byte for byte.
      // With its own serializer a reply gets no default content type, so name it (the same as before).
      reply.type('application/json; charset=utf-8');
      reply.serializer(reply.compileSerializationSchema(FileMetadataSchema));
      return meta;
    }
    const out: FileMetadata[] = [];
    for await (const info of listFolder(deps, key, caller)) out.push(toMetadata(info));
    // The table and S3 list in byte order already; the folder store's order is best effort, so make it
    // exact (checked first: sorting 10,000 keys as buffers cost more than reading them).
    if (!inByteOrder(out)) out.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
    reply.type('application/json; charset=utf-8');
    reply.serializer(reply.compileSerializationSchema(FolderSchema));
    return out;
  });
};
