/**
 * POST /auth/change-password: the signed-in caller sets a new password. The current one is required when
 * the account has one; an account without one needs a recent sign-in. Every other session of the account
 * ends. Wrong `old_password`s are limited like wrong passwords at login (http/guesses.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import { changePassword } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { CurrentPassword, NoContent, Password } from '../schemas.ts';
import { bodyDefaultsToObject, ownSignIn, reauthentication } from './common.ts';

export const changePasswordRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/change-password',
    {
      schema: {
        tags: ['auth'],
        summary: 'Change the password of the signed-in user (ends their other sessions)',
        body: Type.Object(
          {
            old_password: Type.Optional(CurrentPassword),
            new_password: Password(deps.config.MIN_PASSWORD_LENGTH),
          },
          { additionalProperties: false },
        ),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = request.user;
      // A wrong old_password is a password guess (by whoever holds the access token): it counts against
      // the same limits as a wrong password at login, for this account and address.
      const guess =
        request.body.old_password === undefined
          ? undefined
          : await app.guesses.begin(`user:${who['user-id']}`, request.ip);
      try {
        await changePassword(deps, who['user-id'], {
          oldPassword: request.body.old_password,
          newPassword: request.body.new_password,
          own: ownSignIn(request),
          // `old_password` is this route's proof; the window matters only to an account without a password.
          reauth: reauthentication(request, undefined),
        });
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'INCORRECT_PASSWORD')) await guess?.abandon();
        throw err;
      }
      await guess?.succeeded();
      return reply.code(204).send(null);
    },
  );
};
