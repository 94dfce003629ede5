/** GET /admin/users/{id}/sessions: where the user is signed in, newest first. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser, userSessions } from '../../auth/operator.ts';
import { errorResponses } from '../../errors.ts';
import { AdminSession, adminSession, UserIdParams } from '../schemas.ts';

export const userSessionsRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/users/:id/sessions',
    {
      schema: {
        summary: 'A user’s live sessions',
        params: UserIdParams,
        response: { 200: Type.Array(AdminSession), ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => {
      const account = await accountOfUser(deps.db, request.params.id);
      return (await userSessions(deps, account)).map(adminSession);
    },
  );
};
