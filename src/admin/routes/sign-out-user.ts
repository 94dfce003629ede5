/** POST /admin/users/{id}/sign-out: ends every session of the user, at once. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser, signOutUser } from '../../auth/operator.ts';
import { errorResponses } from '../../errors.ts';
import { UserIdParams } from '../schemas.ts';

export const signOutUserRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/users/:id/sign-out',
    {
      schema: {
        summary: 'Sign a user out everywhere',
        description:
          'Every refresh token stops working and every access token of its sessions is refused within a second on every instance. The user can sign in again (PATCH with `disabled: true` blocks that).',
        params: UserIdParams,
        response: {
          200: Type.Object({ sessions_ended: Type.Integer() }),
          ...errorResponses(400, 401, 403, 404, 429, 503),
        },
      },
    },
    async (request) => {
      const account = await accountOfUser(deps.db, request.params.id);
      return { sessions_ended: await signOutUser(deps, account, request.operator) };
    },
  );
};
