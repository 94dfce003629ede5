/** POST /auth/mfa/totp: the second step of a login, with the ticket from POST /auth/login and a code. */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { countSignInFailures, signInEvent } from '../../../metrics/events.ts';
import { bodyDefaultsToObject, requestClient } from '../../routes/common.ts';
import { CookieFlag, Session, Ticket } from '../../schemas.ts';
import { sendSession } from '../../session-response.ts';
import { completeMfaLogin, type MfaDeps } from '../mfa.ts';
import { Code } from './schemas.ts';

const schema = {
  summary: 'Complete an MFA login',
  description:
    'A ticket allows five codes; after five wrong ones it is dead. Wrong codes are also limited per account (429).',
  tags: ['mfa'],
  body: Type.Object(
    { ticket: Ticket, code: Code, cookie: Type.Optional(CookieFlag) },
    { additionalProperties: false },
  ),
  response: { 200: Session, ...errorResponses(400, 401, 429) },
};

export const totpRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  const onError = countSignInFailures('mfa');
  app.post('/totp', { schema, preValidation: bodyDefaultsToObject, onError }, async (request, reply) => {
    const { ticket, code, cookie } = request.body;
    const session = await completeMfaLogin(deps, ticket, code, requestClient(request));
    signInEvent('mfa', 'success');
    return sendSession(reply, deps.config, session, cookie ?? true, deps.clock.now());
  });
};
