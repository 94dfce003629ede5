/**
 * POST /auth/activate/resend — a new activation (or magic register) link for an account still waiting
 * for activation. Always 204, whether or not such an account exists; the email goes out after the answer.
 */

import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AuthDeps } from '../deps.ts';
import { resendActivation } from '../flows/registration.ts';
import { checkRedirect, EmailLinkRequest } from '../redirects.ts';
import { errors, NoContent } from '../schemas.ts';
import { consumeEmailQuota } from './email-quota.ts';

const Body = EmailLinkRequest;

export async function activateResendRoute(app: FastifyInstance, { deps }: { deps: AuthDeps }): Promise<void> {
  app.post<{ Body: Static<typeof Body> }>(
    '/activate/resend',
    {
      schema: {
        summary: 'Send the activation link again (204 whether or not the account exists)',
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errors(400, 429) },
      },
      preHandler: async (request) => consumeEmailQuota(app, deps.config, request.body.email),
    },
    async (request, reply) => {
      const redirectTo = checkRedirect(deps.config, request.body.redirect_to);
      resendActivation(deps, { email: request.body.email, redirectTo });
      return reply.code(204).send();
    },
  );
}
