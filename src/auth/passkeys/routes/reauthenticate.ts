/**
 * POST /auth/passkeys/reauthenticate/options and /verify (signed in): step-up without a password. A
 * passkey of the caller's account answers a challenge bound to that account, and the answer is a new
 * access token of the same session whose `auth_time` is now: the sensitive changes then accept it for
 * SENSITIVE_ACTION_WINDOW seconds.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { cookieOptions } from '../../../http/cookies.ts';
import { PERMISSION_COOKIE, signedCookie } from '../../../http/identity.ts';
import type { AuthDeps } from '../../deps.ts';
import { bodyDefaultsToObject } from '../../routes/common.ts';
import { stepUpOptions, stepUpWithPasskey } from '../ceremonies.ts';
import { authenticationResponse, signedInOrigin } from './convert.ts';
import { AuthenticationCredential, RequestOptions } from './schemas.ts';

const Token = Type.Object({
  jwt_token: Type.String({ description: 'An access token of the same session, with `auth_time` now.' }),
  jwt_expires_in: Type.Integer({ description: 'Milliseconds.' }),
});

export const reauthenticatePasskeyRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  app.post(
    '/reauthenticate/options',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Options to confirm it is you with a passkey (step-up)',
        body: Type.Object({}, { additionalProperties: false }),
        response: { 200: RequestOptions, ...errorResponses(400, 401, 403, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request) => ({ options: await stepUpOptions(deps, request.user['user-id']) }),
  );

  app.post(
    '/reauthenticate/verify',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'A new access token whose auth_time is now',
        body: Type.Object({ credential: AuthenticationCredential }, { additionalProperties: false }),
        response: { 200: Token, ...errorResponses(400, 401, 403, 429, 503) },
      },
    },
    async (request, reply) => {
      const token = await stepUpWithPasskey(
        deps,
        request.user['user-id'],
        authenticationResponse(request.body.credential),
        signedInOrigin(request),
      );
      // A caller signed in by cookie gets the new token in its cookie too.
      if (signedCookie(request, PERMISSION_COOKIE) !== undefined) {
        const s = Math.max(0, Math.floor((token.expiresAt.getTime() - deps.clock.now().getTime()) / 1000));
        reply.setCookie(PERMISSION_COOKIE, token.token, cookieOptions(deps.config, s));
      }
      return { jwt_token: token.token, jwt_expires_in: token.expiresInMs };
    },
  );
};
