/**
 * POST /auth/delete (ALLOW_USER_SELF_DELETE): the signed-in caller deletes their account. The public.users
 * row goes, and with it the account, roles, sessions and tickets (HBP left public.users behind).
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { deleteOwnAccount } from '../accounts.ts';
import { errors, NoContent } from '../schemas.ts';
import { clearSessionCookies } from '../session-response.ts';
import { bodyDefaultsToObject } from './common.ts';

export async function deleteRoute(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/delete',
    {
      schema: {
        tags: ['auth'],
        summary: 'Delete the signed-in user’s account',
        security: [{ bearer: [] }],
        body: Type.Object({}, { additionalProperties: false }),
        response: { 204: NoContent, ...errors(400, 401, 404, 429) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = await request.identity();
      if (!who) throw new AppError('CANNOT_DELETE_ACCOUNT');
      await deleteOwnAccount(ctx, who['user-id']);
      clearSessionCookies(reply, ctx.config);
      return reply.code(204).send(null);
    },
  );
}
