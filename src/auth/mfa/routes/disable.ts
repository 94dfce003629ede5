/** POST /auth/mfa/disable: turns MFA off, confirmed by a code from the active secret. */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { bodyDefaultsToObject, ownSignIn, reauthentication } from '../../routes/common.ts';
import { NoContent, ReauthPassword } from '../../schemas.ts';
import { disableMfa, type MfaDeps } from '../mfa.ts';
import { Code } from './schemas.ts';

const schema = {
  summary: 'Disable MFA',
  description:
    "Needs a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password`. Ends the account's other sessions; the caller's own sign-in (named by its `refresh_token` cookie, else by its access token) is kept.",
  tags: ['mfa'],
  body: Type.Object({ code: Code, password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
  response: { 204: NoContent, ...errorResponses(400, 401, 403, 429, 503) },
};

export const disableRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  app.post('/disable', { schema, preValidation: bodyDefaultsToObject }, async (request, reply) => {
    const user = request.user;
    const { code, password } = request.body;
    await disableMfa(deps, user['user-id'], code, reauthentication(request, password), ownSignIn(request));
    return reply.code(204).send(null);
  });
};
