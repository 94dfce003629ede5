/**
 * Share links, for their owner: POST /storage/shares makes one, GET /storage/shares lists them, DELETE
 * /storage/shares/{id} revokes one at once on every instance (shares/shares.ts). Signed in only.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { createShare, listOwnShares, revokeOwnShare } from '../shares/shares.ts';
import type { StorageRouteDeps } from './common.ts';

const Created = Type.Object(
  {
    id: Type.String({
      description:
        'The link id: a secret, shown only here (stored hashed). Anyone holding it downloads the file.',
    }),
    url: Type.String({ description: 'SERVER_URL + /storage/s/<id>' }),
    handle: Type.String({
      format: 'uuid',
      description: 'Names the link in GET /storage/shares and DELETE /storage/shares/{id}; not a secret.',
    }),
    path: Type.String({ description: 'The shared file.' }),
    expires_at: Type.String({ format: 'date-time' }),
    max_downloads: Type.Union([Type.Integer(), Type.Null()]),
  },
  { additionalProperties: false },
);

const Listed = Type.Object(
  {
    handle: Type.String({ format: 'uuid' }),
    path: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time' }),
    max_downloads: Type.Union([Type.Integer(), Type.Null()]),
    downloads: Type.Integer({ minimum: 0 }),
    status: Type.Union([Type.Literal('active'), Type.Literal('expired'), Type.Literal('used_up')]),
  },
  { additionalProperties: false },
);

const security = [{ bearer: [] }];

export const shareRoutes: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  app.post(
    '/shares',
    {
      schema: {
        summary: 'Make a share link to a file',
        description:
          'The caller must be allowed to read the file by the storage rules (`get`/`read`, without a file token); 404 when it does not exist. `expires_in` in seconds (default STORAGE_SHARE_DEFAULT_SECONDS, at most STORAGE_SHARE_MAX_SECONDS).',
        tags: ['storage'],
        security,
        body: Type.Object(
          {
            path: Type.String({
              minLength: 1,
              maxLength: 1100,
              description: 'The file path as in /storage/o/<path>, not percent-encoded.',
            }),
            expires_in: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds.' })),
            max_downloads: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
          },
          { additionalProperties: false },
        ),
        response: { 201: Created, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const created = await createShare(deps, deps, request.user, request.body, request.log);
      return reply.code(201).send(created);
    },
  );

  app.get(
    '/shares',
    {
      schema: {
        summary: "The caller's share links (not revoked), newest first",
        description: 'With download counts. The link ids are never shown again: each link has its handle.',
        tags: ['storage'],
        security,
        response: { 200: Type.Array(Listed), ...errorResponses(401, 403, 429, 503) },
      },
    },
    async (request) => listOwnShares(deps, request.user),
  );

  app.delete(
    '/shares/:id',
    {
      schema: {
        summary: 'Revoke a share link',
        description:
          'By its handle or its id. It stops working at once, on every instance. 404 for a link that is not one of yours (or is already revoked).',
        tags: ['storage'],
        security,
        params: Type.Object({ id: Type.String({ maxLength: 100 }) }, { additionalProperties: false }),
        response: {
          204: Type.Null({ description: 'Revoked' }),
          ...errorResponses(401, 403, 404, 429, 503),
        },
      },
    },
    async (request, reply) => {
      await revokeOwnShare(deps, request.user, request.params.id);
      return reply.code(204).send(null);
    },
  );
};
