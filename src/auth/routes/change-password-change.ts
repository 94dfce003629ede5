/**
 * POST /auth/change-password/change (LOST_PASSWORD_ENABLED) — sets a new password with the emailed
 * ticket and ends every session of the account.
 */

import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AuthDeps } from '../deps.ts';
import { resetPassword } from '../flows/password-reset.ts';
import { errors, NoContent, Password, Ticket } from '../schemas.ts';

export async function changePasswordChangeRoute(
  app: FastifyInstance,
  { deps }: { deps: AuthDeps },
): Promise<void> {
  const Body = Type.Object(
    { ticket: Ticket, new_password: Password(deps.config.MIN_PASSWORD_LENGTH) },
    { additionalProperties: false },
  );
  app.post<{ Body: Static<typeof Body> }>(
    '/change-password/change',
    {
      schema: {
        summary: 'Reset the password with the emailed ticket (ends every session)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errors(400, 401, 503) },
      },
    },
    async (request, reply) => {
      await resetPassword(deps, { ticket: request.body.ticket, newPassword: request.body.new_password });
      return reply.code(204).send();
    },
  );
}
