/**
 * POST /auth/change-password: the signed-in caller sets a new password. The current one is required when
 * the account has one. Every other session of the account ends.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { decodeJwt } from 'jose';
import type { AppContext } from '../../context.ts';
import { presentedAccessToken } from '../../http/identity.ts';
import { changePassword } from '../accounts.ts';
import { CurrentPassword, errors, NoContent, Password } from '../schemas.ts';
import { sessionOf } from '../sessions.ts';
import { bodyDefaultsToObject, presentedRefreshToken } from './common.ts';

/** `iat` of an access token that requireUser() has already verified. */
function issuedAt(token: string | undefined): number | undefined {
  if (!token) return undefined;
  const iat = decodeJwt(token).iat;
  return typeof iat === 'number' ? iat : undefined;
}

export async function changePasswordRoute(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/change-password',
    {
      schema: {
        tags: ['auth'],
        summary: 'Change the password of the signed-in user (ends their other sessions)',
        security: [{ bearer: [] }],
        body: Type.Object(
          {
            old_password: Type.Optional(CurrentPassword),
            new_password: Password(ctx.config.MIN_PASSWORD_LENGTH),
          },
          { additionalProperties: false },
        ),
        response: { 204: NoContent, ...errors(400, 401, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = await request.requireUser();
      // The caller's own sign-in survives: named by its refresh cookie, or found from its access token.
      const own = presentedRefreshToken(request, {});
      const keep = own ? await sessionOf(ctx, own.value) : undefined;
      await changePassword(ctx, who['user-id'], {
        oldPassword: request.body.old_password,
        newPassword: request.body.new_password,
        keepFamily: keep?.familyId,
        tokenIat: issuedAt(presentedAccessToken(request)),
      });
      return reply.code(204).send(null);
    },
  );
}
