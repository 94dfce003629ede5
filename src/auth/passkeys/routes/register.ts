/**
 * POST /auth/passkeys/register/options and /verify (signed in): add a passkey to the caller's account.
 * Adding a way in is a sensitive change, as an email change is: the options need a sign-in within
 * SENSITIVE_ACTION_WINDOW or the current `password`; the verify step needs the challenge those options
 * gave this account.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import type { AuthDeps } from '../../deps.ts';
import { bodyDefaultsToObject, reauthentication } from '../../routes/common.ts';
import { ReauthPassword } from '../../schemas.ts';
import { addPasskey, addPasskeyOptions } from '../ceremonies.ts';
import { registrationResponse, signedInOrigin } from './convert.ts';
import { CreationOptions, Passkey, PasskeyName, RegistrationCredential } from './schemas.ts';

export const registerPasskeyRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/register/options',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Options to add a passkey to your account',
        description:
          'A sensitive change: needs a sign-in within SENSITIVE_ACTION_WINDOW seconds (a passkey step-up counts) or the current `password`. The options ask for a discoverable credential and exclude your passkeys.',
        body: Type.Object({ password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
        response: { 200: CreationOptions, ...errorResponses(400, 401, 403, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request) => ({
      options: await addPasskeyOptions(
        deps,
        request.user['user-id'],
        reauthentication(request, request.body.password),
      ),
    }),
  );

  app.post(
    '/register/verify',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Store the passkey the browser made from the options',
        body: Type.Object(
          { credential: RegistrationCredential, name: Type.Optional(PasskeyName) },
          { additionalProperties: false },
        ),
        response: { 201: Passkey, ...errorResponses(400, 401, 403, 409, 429, 503) },
      },
    },
    async (request, reply) => {
      const created = await addPasskey(
        deps,
        request.user['user-id'],
        registrationResponse(request.body.credential),
        request.body.name,
        signedInOrigin(request),
      );
      return reply.code(201).send(created);
    },
  );
};
