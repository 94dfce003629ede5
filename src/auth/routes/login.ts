/**
 * POST /auth/login: password sign-in (a session, or `{mfa, ticket}` when the account has MFA), anonymous
 * sign-in (ANONYMOUS_USERS_ENABLED), and admin impersonation (USER_IMPERSONATION_ENABLED, header
 * `x-admin-secret`). Wrong passwords and admin secrets are limited per (account, client address) with
 * growing waits, and per client address (http/guesses.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import { ADMIN_SECRET_SUBJECT, passwordSubject } from '../../http/guesses.ts';
import { type ConfiguredSchema, configuredSchema } from '../../http/schema.ts';
import { countSignInFailures, signInEvent } from '../../metrics/events.ts';
import { loginAnonymously, loginWithPassword } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { requestMagicLogin } from '../flows/magic-link.ts';
import { checkRedirect, RedirectTo } from '../redirects.ts';
import { CookieFlag, CurrentPassword, Email, Session } from '../schemas.ts';
import { sendSession } from '../session-response.ts';
import { bodyDefaultsToObject } from './common.ts';
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
      const useCookie = body.cookie ?? true;
      if (body.anonymous === true) {
        if (body.email !== undefined || body.password !== undefined) {
          throw new AppError('VALIDATION', '"anonymous" cannot be combined with "email" or "password"');
        }
        const session = await loginAnonymously(deps);
        signInEvent('anonymous', 'success');
        return sendSession(reply, c, session, useCookie, deps.clock.now());
      }
      if (body.email === undefined) throw new AppError('VALIDATION', '"email" is required');
      const adminSecret = request.headers['x-admin-secret'];
      if (body.password === undefined && !(c.USER_IMPERSONATION_ENABLED && adminSecret)) {
        if (c.MAGIC_LINK_ENABLED) {
          // The link goes out by email only, after this answer; never a session or cookie here (HBP D1).
          await consumeEmailQuota(app, c, body.email);
          await requestMagicLogin(deps, {
            email: body.email,
            redirectTo: checkRedirect(c, body.redirect_to),
          });
          return { magicLink: true as const };
        }
        throw new AppError('VALIDATION', '"password" is required');
      }
      // With impersonation on, a non-empty admin secret replaces the password check (accounts.ts), so the
      // guess is at the secret, not at this account's password.
      const impersonating =
        c.USER_IMPERSONATION_ENABLED && typeof adminSecret === 'string' && adminSecret !== '';
      const guess = await app.guesses.begin(
        impersonating ? ADMIN_SECRET_SUBJECT : passwordSubject(body.email),
        request.ip,
      );
      let result: Awaited<ReturnType<typeof loginWithPassword>>;
      try {
        result = await loginWithPassword(deps, {
          email: body.email,
          password: body.password,
          adminSecret: typeof adminSecret === 'string' ? adminSecret : undefined,
        });
      } catch (err) {
        const wrong = impersonating ? 'INVALID_ADMIN_SECRET' : 'INVALID_CREDENTIALS';
        if (!(err instanceof AppError && err.code === wrong)) await guess.abandon();
        throw err;
      }
      await guess.succeeded();
      signInEvent('password', result.kind === 'mfa' ? 'mfa_required' : 'success');
      if (result.kind === 'mfa') return { mfa: true as const, ticket: result.ticket };
      return sendSession(reply, c, result.session, useCookie, deps.clock.now());
    },
  );
};
