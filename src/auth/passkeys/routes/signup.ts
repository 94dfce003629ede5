/**
 * POST /auth/passkeys/signup/options and /verify: a new account whose only credential is a passkey, under
 * the rules of POST /auth/register (flows/registration.ts): roles and custom fields as there, the same
 * rate limits, and with AUTO_ACTIVATE_NEW_USERS=false no tokens, an activation email, and the passkey
 * kept with its registration attempt until that attempt's link, followed alone, activates the account.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { Locale } from '../../../mail/templates.ts';
import type { AuthDeps } from '../../deps.ts';
import { checkRedirect, RedirectTo } from '../../redirects.ts';
import { requestClient } from '../../routes/common.ts';
import { RegisterOptions, registrationLimits, userDataSchema } from '../../routes/register.ts';
import { CookieFlag, Email, Session, User } from '../../schemas.ts';
import { sendSession } from '../../session-response.ts';
import { signUpOptions, signUpWithPasskey } from '../ceremonies.ts';
import { registrationResponse } from './convert.ts';
import { CreationOptions, RegistrationCredential } from './schemas.ts';

export const signupPasskeyRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  app.post(
    '/signup/options',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Options to sign up with a passkey',
        description:
          'The checks of POST /auth/register come first (domain, roles, `user_data`; a taken address with AUTO_ACTIVATE_NEW_USERS), so nobody creates a passkey the service then refuses.',
        body: Type.Object(
          {
            email: Email,
            display_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            user_data: Type.Optional(userDataSchema(deps)),
            register_options: Type.Optional(RegisterOptions),
            locale: Type.Optional(Locale),
            redirect_to: Type.Optional(RedirectTo),
          },
          { additionalProperties: false },
        ),
        response: { 200: CreationOptions, ...errorResponses(400, 409, 429, 503) },
      },
      preHandler: async (request) => {
        await registrationLimits(app, deps, request.ip, request.body.email);
      },
    },
    async (request) => {
      const { body } = request;
      const userData: Record<string, unknown> = { ...(body.user_data ?? {}) };
      if (body.display_name !== undefined) userData.display_name = body.display_name;
      return {
        options: await signUpOptions(deps, {
          email: body.email,
          userData,
          registerOptions: body.register_options,
          locale: body.locale,
          redirectTo: checkRedirect(c, body.redirect_to),
          displayName: body.display_name,
        }),
      };
    },
  );

  app.post(
    '/signup/verify',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Create the account with the passkey the browser made',
        description:
          'With AUTO_ACTIVATE_NEW_USERS: a session, as POST /auth/register answers. Otherwise `{user}` and an activation email, the same for a new, a pending and a taken address.',
        body: Type.Object(
          { credential: RegistrationCredential, cookie: Type.Optional(CookieFlag) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Union([Session, Type.Object({ user: User })]),
          ...errorResponses(400, 409, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const result = await signUpWithPasskey(
        deps,
        registrationResponse(request.body.credential),
        requestClient(request),
      );
      if (!result.session) return { user: result.user };
      return sendSession(reply, c, result.session, request.body.cookie ?? true, deps.clock.now());
    },
  );
};
