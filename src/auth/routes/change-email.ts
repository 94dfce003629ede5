/**
 * POST /auth/change-email: the signed-in caller changes their email without verification
 * (VERIFY_EMAILS=false). A sensitive change: a recent sign-in or the current `password`. A taken address
 * is answered like a free one (see auth/flows/email-change.ts).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { changeEmailDirectly } from '../flows/email-change.ts';
import { Email, NoContent, ReauthPassword } from '../schemas.ts';
import { bodyDefaultsToObject, ownSignIn, reauthentication } from './common.ts';
import { consumeEmailQuota } from './email-quota.ts';

export const changeEmailRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/change-email',
    {
      schema: {
        tags: ['auth'],
        summary: 'Change the email of the signed-in user (VERIFY_EMAILS=false)',
        description:
          "Needs a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password`. Ends the account's other sessions and tells the old address. An address in use elsewhere gets the same 204 and changes nothing.",
        body: Type.Object(
          { new_email: Email, password: Type.Optional(ReauthPassword) },
          { additionalProperties: false },
        ),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = request.user;
      // A taken address makes its mailbox get an email: limited per address like every such route.
      await consumeEmailQuota(app, deps.config, request.body.new_email);
      await changeEmailDirectly(deps, who['user-id'], {
        newEmail: request.body.new_email,
        own: ownSignIn(request),
        reauth: reauthentication(request, request.body.password),
      });
      return reply.code(204).send(null);
    },
  );
};
