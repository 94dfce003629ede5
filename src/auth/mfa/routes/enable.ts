/** POST /auth/mfa/enable: turns MFA on with the pending secret, confirmed by a code from it. */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { bodyDefaultsToObject, ownSignIn, reauthentication } from '../../routes/common.ts';
import { NoContent, ReauthPassword } from '../../schemas.ts';
import { enableMfa, type MfaDeps } from '../mfa.ts';
import { Code } from './schemas.ts';

const schema = {
  summary: 'Enable MFA',
  description: 'Needs a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password`.',
  tags: ['mfa'],
  body: Type.Object({ code: Code, password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
  response: { 204: NoContent, ...errorResponses(400, 401, 403, 429, 503) },
};

export const enableRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  app.post('/enable', { schema, preValidation: bodyDefaultsToObject }, async (request, reply) => {
    const user = request.user;
    const { code, password } = request.body;
    await enableMfa(deps, user['user-id'], code, reauthentication(request, password), ownSignIn(request));
    return reply.code(204).send(null);
  });
};
