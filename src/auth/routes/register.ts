/**
 * POST /auth/register: create an account with email and password, or without a password when
 * MAGIC_LINK_ENABLED (contract §4.1, spec §4.1). With AUTO_ACTIVATE_NEW_USERS=false the answer is the same
 * for a new, a pending and an active address (see auth/flows/registration.ts).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../errors.ts';
import { emailKey } from '../../http/counters.ts';
import { type ConfiguredSchema, configuredSchema } from '../../http/schema.ts';
import { Locale } from '../../mail/templates.ts';
import type { AuthDeps } from '../deps.ts';
import { register } from '../flows/registration.ts';
import { checkRedirect, RedirectTo } from '../redirects.ts';
import { CookieFlag, Email, Password, Session, User } from '../schemas.ts';
import { sendSession } from '../session-response.ts';
import { bodyDefaultsToObject, requestClient } from './common.ts';

const Role = Type.String({ minLength: 1, maxLength: 100 });

const CustomValue = Type.Union([
  Type.String({ maxLength: 10_000 }),
  Type.Number(),
  Type.Boolean(),
  Type.Null(),
  Type.Array(Type.Unknown(), { maxItems: 1000 }),
  Type.Object({}, { additionalProperties: true }),
]);

export const RegisterOptions = Type.Object(
  {
    allowed_roles: Type.Optional(Type.Array(Role, { maxItems: 100 })),
    default_role: Type.Optional(Role),
    default_roles: Type.Optional({ ...Role, description: 'Alias of default_role (the spec’s spelling).' }),
  },
  { additionalProperties: false },
);

/** Every field some configuration accepts, as the handler sees them. */
const RegisterFields = Type.Object({
  email: Email,
  password: Type.Optional(Type.String()),
  cookie: Type.Optional(CookieFlag),
  redirect_to: Type.Optional(RedirectTo),
  locale: Type.Optional(Locale),
  user_data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  register_options: Type.Optional(RegisterOptions),
});
type RegisterBody = Static<typeof RegisterFields>;

/** `user_data`: the public.users columns listed in REGISTRATION_CUSTOM_FIELDS (passkey sign-up too). */
export function userDataSchema(deps: Pick<AuthDeps, 'config'>) {
  return Type.Object(
    Object.fromEntries(deps.config.REGISTRATION_CUSTOM_FIELDS.map((f) => [f, Type.Optional(CustomValue)])),
    { additionalProperties: false, description: 'public.users columns listed in REGISTRATION_CUSTOM_FIELDS' },
  );
}

/** The rate limits of a registration (POST /auth/register and the passkey sign-up), per address and email. */
export async function registrationLimits(
  app: Pick<FastifyInstance, 'limiter'>,
  deps: Pick<AuthDeps, 'config'>,
  ip: string,
  email: string,
): Promise<void> {
  const c = deps.config;
  await app.limiter.consume(`register:ip:${ip}`, c.RATE_LIMIT_REGISTER_MAX, c.RATE_LIMIT_REGISTER_WINDOW);
  await app.limiter.consume(
    `register:email:${emailKey(email)}`,
    c.RATE_LIMIT_REGISTER_EMAIL_MAX,
    c.RATE_LIMIT_REGISTER_EMAIL_WINDOW,
  );
}

/**
 * The body this configuration accepts: the password policy, a password optional only with
 * MAGIC_LINK_ENABLED, and `user_data` limited to REGISTRATION_CUSTOM_FIELDS. Validated as built here;
 * typed as RegisterFields.
 */
function bodySchema(deps: AuthDeps): ConfiguredSchema<RegisterBody> {
  const c = deps.config;
  const userData = userDataSchema(deps);
  const schema = Type.Object(
    {
      email: Email,
      password: c.MAGIC_LINK_ENABLED
        ? Type.Optional(Password(c.MIN_PASSWORD_LENGTH))
        : Password(c.MIN_PASSWORD_LENGTH),
      cookie: Type.Optional(CookieFlag),
      redirect_to: Type.Optional(RedirectTo),
      locale: Type.Optional(Locale),
      user_data: Type.Optional(userData),
      register_options: Type.Optional(RegisterOptions),
    },
    { additionalProperties: false },
  );
  return configuredSchema<RegisterBody>(schema);
}

export const registerRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  app.post(
    '/register',
    {
      schema: {
        tags: ['auth'],
        summary: 'Register with email and password',
        description:
          'With AUTO_ACTIVATE_NEW_USERS the account is active and a session is returned; otherwise only `user` is returned and an activation link is emailed. Without auto-activation the answer is the same whether the address is new, pending or taken (a taken address gets a `user.id` that belongs to no account, and its mailbox an email saying it already has an account).',
        body: bodySchema(deps),
        response: {
          200: Type.Union([Session, Type.Object({ user: User })]),
          ...errorResponses(400, 404, 429, 501, 503),
        },
      },
      preValidation: bodyDefaultsToObject,
      preHandler: async (request) => {
        await registrationLimits(app, deps, request.ip, request.body.email);
      },
    },
    async (request, reply) => {
      const { body } = request;
      const redirectTo = checkRedirect(c, body.redirect_to);
      // Without a password (only with MAGIC_LINK_ENABLED: the schema requires one otherwise) the account
      // is activated by a magic link.
      const result = await register(deps, {
        email: body.email,
        password: body.password,
        userData: body.user_data,
        registerOptions: body.register_options,
        redirectTo,
        locale: body.locale,
        client: requestClient(request),
      });
      if (!result.session) return { user: result.user };
      return sendSession(reply, c, result.session, body.cookie ?? true, deps.clock.now());
    },
  );
};
