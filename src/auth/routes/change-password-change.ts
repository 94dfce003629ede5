/**
 * POST /auth/change-password/change (LOST_PASSWORD_ENABLED) — sets a new password with the emailed
 * ticket and ends every session of the account.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { resetPassword } from '../flows/password-reset.ts';
import { NoContent, Password, Ticket } from '../schemas.ts';
import { requestClient } from './common.ts';

export const changePasswordChangeRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  const Body = Type.Object(
    { ticket: Ticket, new_password: Password(deps.config.MIN_PASSWORD_LENGTH) },
    { additionalProperties: false },
  );
  app.post(
    '/change-password/change',
    {
      schema: {
        summary: 'Reset the password with the emailed ticket (ends every session)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errorResponses(400, 401, 503) },
      },
    },
    async (request, reply) => {
      await resetPassword(deps, {
        ticket: request.body.ticket,
        newPassword: request.body.new_password,
        client: requestClient(request),
      });
      return reply.code(204).send(null);
    },
  );
};
