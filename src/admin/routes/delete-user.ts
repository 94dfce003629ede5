/** DELETE /admin/users/{id}: deletes the user; every access token of it is refused from now on. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser, deleteUserAccount } from '../../auth/operator.ts';
import { NoContent } from '../../auth/schemas.ts';
import { errorResponses } from '../../errors.ts';
import { UserIdParams } from '../schemas.ts';

export const deleteUserRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.delete(
    '/users/:id',
    {
      schema: {
        summary: 'Delete a user',
        description:
          'Deletes its public.users row; the account, roles, sessions and links go with it. Its files stay in storage.',
        params: UserIdParams,
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const account = await accountOfUser(deps.db, request.params.id);
      await deleteUserAccount(deps, account);
      // Its security feed went with it: the log keeps who deleted whom (ids only).
      request.log.info(
        { deletedUserId: account.user_id, operator: request.operator },
        'an operator deleted a user',
      );
      return reply.code(204).send(null);
    },
  );
};
