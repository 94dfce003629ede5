/** GET /admin/users: the accounts, a page at a time, optionally those whose address contains `email`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { listUsers } from '../../auth/operator.ts';
import { errorResponses } from '../../errors.ts';
import { AdminUser, adminUser } from '../schemas.ts';

export const listUsersRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/users',
    {
      schema: {
        summary: 'List users, oldest first, a page at a time',
        querystring: Type.Object(
          {
            email: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 254,
                description: 'Only addresses that contain this text (any case).',
              }),
            ),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
            cursor: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 300,
                description: 'The next_cursor of the previous page, as it was given.',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            users: Type.Array(AdminUser),
            next_cursor: Type.Union([Type.String(), Type.Null()], {
              description: 'Pass as `cursor` for the next page; null on the last one.',
            }),
          }),
          ...errorResponses(400, 401, 403, 429, 503),
        },
      },
    },
    async (request) => {
      const { email, limit = 50, cursor } = request.query;
      const page = await listUsers(deps, { email, limit, cursor });
      return { users: page.users.map(adminUser), next_cursor: page.nextCursor };
    },
  );
};
