/**
 * POST /auth/delete (ALLOW_USER_SELF_DELETE): the signed-in caller deletes their account. The public.users
 * row goes, and with it the account, roles, sessions and tickets (HBP left public.users behind). A
 * sensitive change: a recent sign-in or the current `password` (auth/reauth.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { deleteOwnAccount } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { NoContent, ReauthPassword } from '../schemas.ts';
import { clearSessionCookies } from '../session-response.ts';
import { bodyDefaultsToObject, reauthentication } from './common.ts';

export const deleteRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/delete',
    {
      schema: {
        tags: ['auth'],
        summary: 'Delete the signed-in user’s account',
        body: Type.Object({ password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
      // HBP's answer to a caller who is not signed in.
      config: { anonymousError: 'CANNOT_DELETE_ACCOUNT' },
    },
    async (request, reply) => {
      await deleteOwnAccount(deps, request.user['user-id'], reauthentication(request, request.body.password));
      clearSessionCookies(reply, deps.config);
      return reply.code(204).send(null);
    },
  );
};
