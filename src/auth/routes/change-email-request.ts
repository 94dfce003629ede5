/**
 * POST /auth/change-email/request (VERIFY_EMAILS) — emails a ticket to the new address (through the
 * outbox, after the commit). A sensitive change: a recent sign-in or the current `password`. A taken address is answered like a free one (see auth/flows/email-change.ts).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { requestEmailChange } from '../flows/email-change.ts';
import { checkRedirect, RedirectTo } from '../redirects.ts';
import { Email, NoContent, ReauthPassword } from '../schemas.ts';
import { ownSignIn, reauthentication } from './common.ts';
import { consumeEmailQuota } from './email-quota.ts';

const Body = Type.Object(
  {
    new_email: Email,
    redirect_to: Type.Optional(RedirectTo),
    password: Type.Optional(ReauthPassword),
  },
  { additionalProperties: false },
);

export const changeEmailRequestRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  app.post(
    '/change-email/request',
    {
      schema: {
        summary: 'Ask to change the email: a ticket is sent to the new address',
        description:
          "Needs a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password`. An address in use elsewhere gets the same 204: its mailbox is told instead, and no ticket is issued. Confirming ends the account's other sessions and tells the old address.",
        tags: ['auth', 'email'],
        body: Body,
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 429, 503) },
      },
    },
    async (request, reply) => {
      const who = request.user;
      await consumeEmailQuota(app, deps.config, request.body.new_email);
      const redirectTo = checkRedirect(deps.config, request.body.redirect_to);
      await requestEmailChange(deps, who['user-id'], {
        newEmail: request.body.new_email,
        redirectTo,
        own: ownSignIn(request),
        reauth: reauthentication(request, request.body.password),
      });
      return reply.code(204).send(null);
    },
  );
};
