/**
 * GET and HEAD /storage/o/<file>: the bytes. GET /storage/o/<folder>/: the folder as a zip.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorResponses } from '../../errors.ts';
import { imageQueryProperties } from '../images/params.ts';
import { imageParamsOf, sendImage, transformsType } from '../images/send.ts';
import { listFolder, resolveFile, ruleCheckedFile } from '../service.ts';
import { callerOf, KeyParams, keyOf, type StorageRouteDeps, security } from './common.ts';
import { sendFile } from './send-file.ts';
import { sendZip } from './send-zip.ts';

const binary = Type.String({ format: 'binary', description: 'The file bytes (or a zip of the folder)' });

const Query = Type.Object(
  {
    token: Type.Optional(Type.String({ description: 'The file token, for rules that use it.' })),
    ...imageQueryProperties,
  },
  { additionalProperties: true },
);

const schema = {
  summary: 'Download a file, or a folder as a zip (path ending in "/")',
  description:
    'ETag/Last-Modified with If-None-Match/If-Modified-Since (304), a single Range (206, 416 when unsatisfiable). Rules: `get`/`read` for a file; `list`/`read` for a folder and each file in it (and `get`/`read` for each zipped file). Any of w, h, q, f, r, b returns a transformed image (after the same rules; see docs/images.md). Query parameters other than these and `token` are ignored (cache-busters).',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: Query,
  response: {
    200: binary,
    206: binary,
    304: Type.Null({ description: 'Not modified' }),
    ...errorResponses(400, 401, 403, 404, 415, 416, 422, 429, 503),
  },
};

export const getFileRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  // GET and HEAD share it; each passes its query as its schema typed it.
  const serve = async (request: FastifyRequest, query: Static<typeof Query>, reply: FastifyReply) => {
    const key = keyOf(request);
    const caller = await callerOf(request, query, deps.config);
    if (key.folder) {
      const files = listFolder(deps, key, caller, { forZip: true })[Symbol.asyncIterator]();
      return sendZip(deps, reply, key, files, { head: request.method === 'HEAD' });
    }
    const image = imageParamsOf(query);
    if (image) {
      // Access is settled here: a transformation of the bytes plugs in between this and sending.
      const file = await resolveFile(deps, key, caller);
      if (transformsType(deps.config, file.info.contentType))
        return sendImage(deps.images, deps, request, reply, file, image);
    }
    return sendFile(deps, request, reply, ruleCheckedFile(deps, key, caller));
  };
  app.get('/o/*', { schema, exposeHeadRoute: false }, (request, reply) =>
    serve(request, request.query, reply),
  );
  app.head(
    '/o/*',
    { schema: { ...schema, summary: 'File headers without the bytes', response: undefined } },
    (request, reply) => serve(request, request.query, reply),
  );
};
