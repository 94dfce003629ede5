/** POST /auth/mfa/disable: turns MFA off, confirmed by a code from the active secret. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { disableMfa, type MfaDeps } from '../mfa.ts';
import { Code, errorResponses, NoContent } from './schemas.ts';

const schema = {
  summary: 'Disable MFA',
  tags: ['mfa'],
  security: [{ bearer: [] }],
  body: Type.Object({ code: Code }, { additionalProperties: false }),
  response: { 204: NoContent, ...errorResponses(400, 401, 429) },
};

export const disableRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  app.post('/disable', { schema }, async (request, reply) => {
    const user = await request.requireUser();
    await disableMfa(deps, user['user-id'], request.body.code);
    return reply.code(204).send(null);
  });
};
