/** GET /admin/users/{id}: one user with its state, roles, provider identities and live sessions. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { userDetails } from '../../auth/operator.ts';
import { errorResponses } from '../../errors.ts';
import { AdminUserDetails, adminUserDetails, UserIdParams } from '../schemas.ts';

export const getUserRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/users/:id',
    {
      schema: {
        summary: 'One user: state, roles, providers, MFA, sessions',
        params: UserIdParams,
        response: { 200: AdminUserDetails, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => adminUserDetails(await userDetails(deps, request.params.id)),
  );
};
