/**
 * POST /auth/passkeys/login/options and /verify: sign in with a passkey. The options name no credential
 * (discoverable passkeys), so they are the same for everyone and tell nothing about any address. The
 * answer of verify is POST /auth/login's: a session (cookies as for login), or `{mfa, ticket}` for an
 * account with TOTP when the authenticator did not verify the person.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { countSignInFailures } from '../../../metrics/events.ts';
import type { AuthDeps } from '../../deps.ts';
import { bodyDefaultsToObject, requestClient } from '../../routes/common.ts';
import { CookieFlag, Session } from '../../schemas.ts';
import { sendSession } from '../../session-response.ts';
import { signInOptions, signInWithPasskey } from '../ceremonies.ts';
import { authenticationResponse } from './convert.ts';
import { AuthenticationCredential, RequestOptions } from './schemas.ts';

const MfaRequired = Type.Object({ mfa: Type.Literal(true), ticket: Type.String({ format: 'uuid' }) });

export const loginPasskeyRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  const limit = async (request: { ip: string }) => {
    await app.limiter.consume(`login:ip:${request.ip}`, c.RATE_LIMIT_LOGIN_MAX, c.RATE_LIMIT_LOGIN_WINDOW);
  };
  app.post(
    '/login/options',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Options to sign in with a passkey',
        description:
          'No `allowCredentials`: the browser offers its passkeys for this site (conditional UI works).',
        body: Type.Object({}, { additionalProperties: false }),
        response: { 200: RequestOptions, ...errorResponses(400, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
      preHandler: limit,
    },
    async () => ({ options: await signInOptions(deps) }),
  );

  app.post(
    '/login/verify',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Sign in with the passkey the browser chose',
        description:
          'The answer of POST /auth/login. With user verification (the UV flag) the sign-in is multi-factor: an account with TOTP is not asked for a code; without it, such an account gets `{mfa, ticket}`. A fresh sign-in for SENSITIVE_ACTION_WINDOW.',
        body: Type.Object(
          { credential: AuthenticationCredential, cookie: Type.Optional(CookieFlag) },
          { additionalProperties: false },
        ),
        response: { 200: Type.Union([Session, MfaRequired]), ...errorResponses(400, 401, 429, 503) },
      },
      onError: countSignInFailures('passkey'),
      preHandler: limit,
    },
    async (request, reply) => {
      const result = await signInWithPasskey(
        deps,
        authenticationResponse(request.body.credential),
        requestClient(request),
      );
      if (result.kind === 'mfa') return { mfa: true as const, ticket: result.ticket };
      return sendSession(reply, c, result.session, request.body.cookie ?? true, deps.clock.now());
    },
  );
};
