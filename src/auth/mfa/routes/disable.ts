/** POST /auth/mfa/disable: turns MFA off, confirmed by a code from the active secret. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { bodyDefaultsToObject, ownSignIn } from '../../routes/common.ts';
import { errors, NoContent } from '../../schemas.ts';
import { disableMfa, type MfaDeps } from '../mfa.ts';
import { Code } from './schemas.ts';

const schema = {
  summary: 'Disable MFA',
  description:
    "Ends the account's other sessions; the caller's own sign-in (named by its `refresh_token` cookie, else by its access token) is kept.",
  tags: ['mfa'],
  security: [{ bearer: [] }],
  body: Type.Object({ code: Code }, { additionalProperties: false }),
  response: { 204: NoContent, ...errors(400, 401, 429) },
};

export const disableRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  app.post('/disable', { schema, preValidation: bodyDefaultsToObject }, async (request, reply) => {
    const user = await request.requireUser();
    await disableMfa(deps, user['user-id'], request.body.code, ownSignIn(request));
    return reply.code(204).send(null);
  });
};
