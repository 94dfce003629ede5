/** POST /auth/token/revoke: the signed-in caller ends every one of their sessions (contract §4.9). */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { callerAccount } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { NoContent } from '../schemas.ts';
import { endAllSessions, endedBy } from '../sessions.ts';
import { bodyDefaultsToObject, ownSignIn } from './common.ts';

export const tokenRevokeRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/token/revoke',
    {
      schema: {
        tags: ['auth'],
        summary: 'End every session of the signed-in user',
        body: Type.Object({}, { additionalProperties: false }),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 429) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = request.user;
      const account = await callerAccount(deps, who['user-id']);
      await endAllSessions(
        deps,
        account.id,
        undefined,
        deps.db,
        endedBy('sign_out_everywhere', ownSignIn(request)),
      );
      return reply.code(204).send(null);
    },
  );
};
