/**
 * POST /auth/otp/email — a 6-digit sign-in code by email (204 whether or not the address has an
 * account; with `create_user`, an unknown address gets a sign-up code). POST /auth/otp/email/verify —
 * the code for the answer of POST /auth/login. Registered only with EMAIL_OTP_ENABLED (and emails on).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import { signInEvent } from '../../metrics/events.ts';
import type { AuthDeps } from '../deps.ts';
import { requestEmailCode, verifyEmailCode } from '../flows/email-otp.ts';
import { checkRedirect, RedirectTo } from '../redirects.ts';
import { CookieFlag, Email, NoContent, Session } from '../schemas.ts';
import { sendSession } from '../session-response.ts';
import { requestClient } from './common.ts';
import { consumeEmailQuota } from './email-quota.ts';

const RequestBody = Type.Object(
  {
    email: Email,
    create_user: Type.Optional(
      Type.Boolean({
        description: 'true: an address without an account gets a sign-up code (default false).',
      }),
    ),
    redirect_to: Type.Optional(RedirectTo),
  },
  { additionalProperties: false },
);

const VerifyBody = Type.Object(
  {
    email: Email,
    code: Type.String({ pattern: '^[0-9]{6}$', description: 'The 6-digit code from the email.' }),
    cookie: Type.Optional(CookieFlag),
  },
  { additionalProperties: false },
);

export const emailOtpRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  app.post(
    '/otp/email',
    {
      schema: {
        summary: 'Email a 6-digit sign-in code (204 whether or not the address has an account)',
        tags: ['auth', 'email'],
        body: RequestBody,
        response: { 204: NoContent, ...errorResponses(400, 429, 503) },
      },
      preHandler: async (request) => consumeEmailQuota(app, c, request.body.email),
    },
    async (request, reply) => {
      const { email, create_user, redirect_to } = request.body;
      await requestEmailCode(deps, {
        email,
        createUser: create_user ?? false,
        redirectTo: checkRedirect(c, redirect_to),
      });
      return reply.code(204).send(null);
    },
  );
  app.post(
    '/otp/email/verify',
    {
      schema: {
        summary: 'Sign in with an emailed code: the answer of POST /auth/login',
        description:
          'A session, or `{mfa: true, ticket}` when the account has MFA. A wrong, used or expired code, and an address without a code, all answer 401 INVALID_CODE; the fifth wrong code kills the code.',
        tags: ['auth', 'email'],
        body: VerifyBody,
        response: {
          200: Type.Union([Session, Type.Object({ mfa: Type.Literal(true), ticket: Type.String() })]),
          ...errorResponses(400, 401, 403, 429, 503),
        },
      },
      preHandler: async (request) => {
        await app.limiter.consume(
          `login:ip:${request.ip}`,
          c.RATE_LIMIT_LOGIN_MAX,
          c.RATE_LIMIT_LOGIN_WINDOW,
        );
      },
    },
    async (request, reply) => {
      const { email, code, cookie } = request.body;
      let outcome: Awaited<ReturnType<typeof verifyEmailCode>>;
      try {
        outcome = await verifyEmailCode(deps, { email, code, client: requestClient(request) });
      } catch (err) {
        if (err instanceof AppError && err.code === 'INVALID_CODE') signInEvent('email_otp', 'invalid_code');
        throw err;
      }
      signInEvent('email_otp', outcome.kind === 'mfa' ? 'mfa_required' : 'success');
      if (outcome.kind === 'mfa') return { mfa: true as const, ticket: outcome.ticket };
      return sendSession(reply, c, outcome.session, cookie ?? true, deps.clock.now());
    },
  );
};
