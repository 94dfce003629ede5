/**
 * POST /auth/activate/resend — a new activation (or magic register) link for an account still waiting
 * for activation. Always 204, whether or not such an account exists; the email goes out after the answer.
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { resendActivation } from '../flows/registration.ts';
import { checkRedirect, EmailLinkRequest } from '../redirects.ts';
import { NoContent } from '../schemas.ts';
import { consumeEmailQuota } from './email-quota.ts';

const Body = EmailLinkRequest;

export const activateResendRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/activate/resend',
    {
      schema: {
        summary: 'Send the activation link again (204 whether or not the account exists)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errorResponses(400, 429) },
      },
      preHandler: async (request) => consumeEmailQuota(app, deps.config, request.body.email),
    },
    async (request, reply) => {
      const redirectTo = checkRedirect(deps.config, request.body.redirect_to);
      await resendActivation(deps, { email: request.body.email, redirectTo });
      return reply.code(204).send(null);
    },
  );
};
