/**
 * POST /auth/change-password/request (LOST_PASSWORD_ENABLED) — always 204 at once; a reset ticket is
 * emailed afterwards, only to an existing, active account.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { requestPasswordReset } from '../flows/password-reset.ts';
import { checkRedirect, EmailLinkRequest } from '../redirects.ts';
import { NoContent } from '../schemas.ts';
import { consumeEmailQuota } from './email-quota.ts';

const Body = EmailLinkRequest;

export const changePasswordRequestRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  app.post(
    '/change-password/request',
    {
      schema: {
        summary: 'Lost password: email a reset ticket (204 whether or not the account exists)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errorResponses(400, 429) },
      },
      preHandler: async (request) => consumeEmailQuota(app, deps.config, request.body.email),
    },
    async (request, reply) => {
      const redirectTo = checkRedirect(deps.config, request.body.redirect_to);
      await requestPasswordReset(deps, { email: request.body.email, redirectTo });
      return reply.code(204).send(null);
    },
  );
};
