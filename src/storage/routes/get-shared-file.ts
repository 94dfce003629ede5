/**
 * GET and HEAD /storage/s/{id}: the file of a share link, to anyone holding the link, served as GET
 * /storage/o serves it (validators, 304, one range, image parameters, the same presentation rules).
 * 404 for an id no link has; 410 SHARE_LINK_GONE for a link that no longer works. Each answer carrying
 * bytes counts one download (shares/shares.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorResponses } from '../../errors.ts';
import { imageQueryProperties } from '../images/params.ts';
import { imageParamsOf, sendImage, transformsType } from '../images/send.ts';
import { sharedFile } from '../shares/shares.ts';
import type { StorageRouteDeps } from './common.ts';
import { sendFile } from './send-file.ts';

const binary = Type.String({ format: 'binary', description: 'The file bytes' });

const Params = Type.Object(
  { id: Type.String({ maxLength: 100, description: 'The link id (a secret).' }) },
  { additionalProperties: false },
);
const Query = Type.Object({ ...imageQueryProperties }, { additionalProperties: true });

const schema = {
  summary: 'Download the file of a share link (no credential)',
  description:
    'As GET /storage/o/<file>: ETag/304, a single Range (206/416), image parameters. Every answer that carries bytes (200, 206, a transformed image) counts as one download; HEAD and 304 do not. 410 once the link has expired, was revoked, is used up, or its file was deleted.',
  tags: ['storage'],
  security: [{}],
  params: Params,
  querystring: Query,
  response: {
    200: binary,
    206: binary,
    304: Type.Null({ description: 'Not modified' }),
    ...errorResponses(400, 404, 410, 415, 416, 422, 429, 503),
  },
};

export const getSharedFileRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (
  app,
  { deps },
) => {
  const serve = async (
    request: FastifyRequest,
    id: string,
    query: Static<typeof Query>,
    reply: FastifyReply,
  ) => {
    const source = await sharedFile(deps, deps, id);
    const image = imageParamsOf(query);
    if (image) {
      const file = await source.resolve();
      if (transformsType(deps.config, file.info.contentType))
        return sendImage(deps.images, deps, request, reply, file, image, source.beforeBytes);
    }
    return sendFile(deps, request, reply, source);
  };
  app.get('/s/:id', { schema, exposeHeadRoute: false }, (request, reply) =>
    serve(request, request.params.id, request.query, reply),
  );
  app.head(
    '/s/:id',
    { schema: { ...schema, summary: 'Share link file headers without the bytes', response: undefined } },
    (request, reply) => serve(request, request.params.id, request.query, reply),
  );
};
