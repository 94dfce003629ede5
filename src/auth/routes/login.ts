/**
 * POST /auth/login: password sign-in (a session, or `{mfa, ticket}` when the account has MFA), anonymous
 * sign-in (ANONYMOUS_USERS_ENABLED), a magic link (MAGIC_LINK_ENABLED) and admin impersonation
 * (USER_IMPERSONATION_ENABLED, header `x-admin-secret`). Which proof counts, and the limits on guessing
 * it, are decided in one place: auth/sign-in.ts.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { type ConfiguredSchema, configuredSchema } from '../../http/schema.ts';
import { countSignInFailures } from '../../metrics/events.ts';
import type { AuthDeps } from '../deps.ts';
import { RedirectTo } from '../redirects.ts';
import { CookieFlag, CurrentPassword, Email, Session } from '../schemas.ts';
import { sendSession } from '../session-response.ts';
import { type SignInLimits, signIn } from '../sign-in.ts';
import { bodyDefaultsToObject, requestClient } from './common.ts';
import { consumeEmailQuota } from './email-quota.ts';

/** Every field some configuration accepts, each optional: what the handler may find in a body. */
const LoginFields = Type.Object({
  email: Type.Optional(Email),
  password: Type.Optional(CurrentPassword),
  cookie: Type.Optional(CookieFlag),
  redirect_to: Type.Optional(RedirectTo),
  anonymous: Type.Optional(Type.Boolean()),
});
type LoginBody = Static<typeof LoginFields>;

/**
 * The body this configuration accepts: fields whose feature is off are refused, and `email` and
 * `password` are required unless another proof can stand in for them. Validated as built here; typed as
 * LoginFields, so the handler checks what the settings made optional.
 */
function bodySchema(deps: AuthDeps): ConfiguredSchema<LoginBody> {
  const c = deps.config;
  // The password is optional when another proof can stand in for it.
  const passwordOptional = c.MAGIC_LINK_ENABLED || c.USER_IMPERSONATION_ENABLED || c.ANONYMOUS_USERS_ENABLED;
  const schema = Type.Object(
    {
      email: c.ANONYMOUS_USERS_ENABLED ? Type.Optional(Email) : Email,
      password: passwordOptional ? Type.Optional(CurrentPassword) : CurrentPassword,
      cookie: Type.Optional(CookieFlag),
      ...(c.MAGIC_LINK_ENABLED ? { redirect_to: Type.Optional(RedirectTo) } : {}),
      ...(c.ANONYMOUS_USERS_ENABLED
        ? {
            anonymous: Type.Optional(Type.Boolean({ description: 'true: sign in as a new anonymous user.' })),
          }
        : {}),
    },
    { additionalProperties: false },
  );
  return configuredSchema<LoginBody>(schema);
}

const MfaRequired = Type.Object({ mfa: Type.Literal(true), ticket: Type.String({ format: 'uuid' }) });
const MagicLinkSent = Type.Object(
  { magicLink: Type.Literal(true) },
  { description: 'No password and MAGIC_LINK_ENABLED: a link is emailed if the account exists.' },
);

export const loginRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  const limits: SignInLimits = {
    guesses: app.guesses,
    emailQuota: (address) => consumeEmailQuota(app, c, address),
  };
  app.post(
    '/login',
    {
      schema: {
        tags: ['auth'],
        summary: 'Sign in with email and password',
        description:
          'Returns a session, or `{mfa: true, ticket}` when the account has MFA (finish with POST /auth/mfa/totp). Unknown email and wrong password give the same 401.',
        body: bodySchema(deps),
        response: {
          200: Type.Union([Session, MfaRequired, MagicLinkSent]),
          ...errorResponses(400, 401, 404, 429, 501, 503),
        },
      },
      preValidation: bodyDefaultsToObject,
      onError: countSignInFailures('password'),
      preHandler: async (request) => {
        await app.limiter.consume(
          `login:ip:${request.ip}`,
          c.RATE_LIMIT_LOGIN_MAX,
          c.RATE_LIMIT_LOGIN_WINDOW,
        );
      },
    },
    async (request, reply) => {
      const { body } = request;
      const adminSecret = request.headers['x-admin-secret'];
      const result = await signIn(deps, limits, {
        email: body.email,
        password: body.password,
        anonymous: body.anonymous,
        redirectTo: body.redirect_to,
        adminSecret: typeof adminSecret === 'string' ? adminSecret : undefined,
        address: request.ip,
        userAgent: requestClient(request).userAgent,
      });
      if (result.kind === 'magic-link') return { magicLink: true as const };
      if (result.kind === 'mfa') return { mfa: true as const, ticket: result.ticket };
      return sendSession(reply, c, result.session, body.cookie ?? true, deps.clock.now());
    },
  );
};
