/**
 * POST /auth/change-email/change (VERIFY_EMAILS) — switches the email with the ticket of the request
 * step. No sign-in needed: the ticket proves the new address.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { confirmEmailChange } from '../flows/email-change.ts';
import { NoContent, Ticket } from '../schemas.ts';
import { requestClient } from './common.ts';

const Body = Type.Object({ ticket: Ticket }, { additionalProperties: false });

export const changeEmailChangeRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  app.post(
    '/change-email/change',
    {
      schema: {
        summary: 'Confirm an email change with the emailed ticket',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errorResponses(400, 401, 503) },
      },
    },
    async (request, reply) => {
      await confirmEmailChange(deps, request.body.ticket, requestClient(request));
      return reply.code(204).send(null);
    },
  );
};
