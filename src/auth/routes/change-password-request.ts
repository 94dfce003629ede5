/**
 * POST /auth/change-password/request (LOST_PASSWORD_ENABLED) — always 204 at once; a reset ticket is
 * emailed afterwards, only to an existing, active account.
 */

import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AuthDeps } from '../deps.ts';
import { requestPasswordReset } from '../flows/password-reset.ts';
import { checkRedirect, EmailLinkRequest } from '../redirects.ts';
import { errors, NoContent } from '../schemas.ts';
import { consumeEmailQuota } from './email-quota.ts';

const Body = EmailLinkRequest;

export async function changePasswordRequestRoute(
  app: FastifyInstance,
  { deps }: { deps: AuthDeps },
): Promise<void> {
  app.post<{ Body: Static<typeof Body> }>(
    '/change-password/request',
    {
      schema: {
        summary: 'Lost password: email a reset ticket (204 whether or not the account exists)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errors(400, 429) },
      },
      preHandler: async (request) => consumeEmailQuota(app, deps.config, request.body.email),
    },
    async (request, reply) => {
      const redirectTo = checkRedirect(deps.config, request.body.redirect_to);
      requestPasswordReset(deps, { email: request.body.email, redirectTo });
      return reply.code(204).send();
    },
  );
}
