/** POST /auth/mfa/enable: turns MFA on with the pending secret, confirmed by a code from it. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { bodyDefaultsToObject } from '../../routes/common.ts';
import { errors, NoContent } from '../../schemas.ts';
import { enableMfa, type MfaDeps } from '../mfa.ts';
import { Code } from './schemas.ts';

const schema = {
  summary: 'Enable MFA',
  tags: ['mfa'],
  security: [{ bearer: [] }],
  body: Type.Object({ code: Code }, { additionalProperties: false }),
  response: { 204: NoContent, ...errors(400, 401, 429) },
};

export const enableRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  app.post('/enable', { schema, preValidation: bodyDefaultsToObject }, async (request, reply) => {
    const user = await request.requireUser();
    await enableMfa(deps, user['user-id'], request.body.code);
    return reply.code(204).send(null);
  });
};
