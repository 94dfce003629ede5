/** POST /auth/change-email: the signed-in caller changes their email without verification (VERIFY_EMAILS=false). */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { changeEmailDirectly } from '../accounts.ts';
import { Email, errors, NoContent } from '../schemas.ts';
import { bodyDefaultsToObject } from './common.ts';

export async function changeEmailRoute(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/change-email',
    {
      schema: {
        tags: ['auth'],
        summary: 'Change the email of the signed-in user (VERIFY_EMAILS=false)',
        security: [{ bearer: [] }],
        body: Type.Object({ new_email: Email }, { additionalProperties: false }),
        response: { 204: NoContent, ...errors(400, 401, 429) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = await request.requireUser();
      await changeEmailDirectly(ctx, who['user-id'], request.body.new_email);
      return reply.code(204).send(null);
    },
  );
}
