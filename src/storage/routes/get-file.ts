/**
 * GET and HEAD /storage/o/<file>: the bytes. GET /storage/o/<folder>/: the folder as a zip.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { imageQueryProperties } from '../images/params.ts';
import { imageParamsOf, sendImage } from '../images/send.ts';
import { listFolder, resolveFile } from '../service.ts';
import { callerOf, errors, KeyParams, keyOf, type StorageRouteDeps, security } from './common.ts';
import { sendFile } from './send-file.ts';
import { sendZip } from './send-zip.ts';

const binary = { description: 'The file bytes (or a zip of the folder)', type: 'string', format: 'binary' };

const schema = {
  summary: 'Download a file, or a folder as a zip (path ending in "/")',
  description:
    'ETag/Last-Modified with If-None-Match/If-Modified-Since (304), a single Range (206, 416 when unsatisfiable). Rules: `get`/`read` for a file; `list`/`read` for a folder and each file in it (and `get`/`read` for each zipped file). Any of w, h, q, f, r, b returns a transformed image (after the same rules; see the README). Query parameters other than these and `token` are ignored (cache-busters).',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: Type.Object(
    {
      token: Type.Optional(Type.String({ description: 'The file token, for rules that use it.' })),
      ...imageQueryProperties,
    },
    { additionalProperties: true },
  ),
  response: {
    200: binary,
    206: binary,
    304: { type: 'null', description: 'Not modified' },
    ...errors(400, 401, 403, 404, 415, 416, 422, 503),
  },
};

export async function getFileRoute(
  app: FastifyInstance,
  { deps }: { deps: StorageRouteDeps },
): Promise<void> {
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = keyOf(request);
    const caller = await callerOf(request, deps.config);
    if (key.folder) {
      const files = listFolder(deps, key, caller, { forZip: true })[Symbol.asyncIterator]();
      return sendZip(deps, reply, key, files, { head: request.method === 'HEAD' });
    }
    const image = imageParamsOf(request.query);
    if (image) {
      // Access is settled here: a transformation of the bytes plugs in between this and sending.
      const file = await resolveFile(deps, key, caller);
      return sendImage(deps.images, deps, request, reply, file, image);
    }
    return sendFile(deps, request, reply, key, caller);
  };
  app.get('/o/*', { schema, exposeHeadRoute: false }, handler);
  app.head(
    '/o/*',
    { schema: { ...schema, summary: 'File headers without the bytes', response: undefined } },
    handler,
  );
}
