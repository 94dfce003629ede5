/** POST /auth/mfa/generate: a new pending TOTP secret and its QR code for the signed-in user. */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { bodyDefaultsToObject, reauthentication } from '../../routes/common.ts';
import { ReauthPassword } from '../../schemas.ts';
import { generateMfaSecret, type MfaDeps } from '../mfa.ts';

const schema = {
  summary: 'Generate a TOTP secret',
  description:
    'Creates a pending secret; it becomes the active one only when confirmed with `/auth/mfa/enable`. While MFA is enabled the active secret keeps working. Needs a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password`.',
  tags: ['mfa'],
  body: Type.Object(
    { password: Type.Optional(ReauthPassword) },
    { additionalProperties: false, description: 'Only the optional `password`; the body may be omitted.' },
  ),
  response: {
    200: Type.Object({
      image_url: Type.String({ description: 'QR code of the otpauth URI, `data:image/png;base64,…`' }),
      otp_secret: Type.String({ description: 'The secret in base32' }),
    }),
    ...errorResponses(400, 401, 403, 429, 503),
  },
};

export const generateRoute: FastifyPluginAsyncTypebox<{ deps: MfaDeps }> = async (app, { deps }) => {
  // HBP clients post without a body; an absent body counts as `{}` (fields are still refused).
  app.post('/generate', { schema, preValidation: bodyDefaultsToObject }, async (request) => {
    const user = request.user;
    return generateMfaSecret(deps, user['user-id'], reauthentication(request, request.body.password));
  });
};
