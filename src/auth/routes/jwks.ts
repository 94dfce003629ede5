/** GET /auth/jwks: the public key that verifies access tokens (asymmetric algorithms only). */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { errors } from '../schemas.ts';

const Jwks = Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) });

export async function jwksRoute(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/jwks',
    {
      schema: {
        tags: ['auth'],
        summary: 'JSON Web Key Set of the access-token key (501 with an HS* shared secret)',
        response: { 200: Jwks, ...errors(429, 501) },
      },
    },
    async () => {
      // A shared secret has no public half; publishing it would let anyone mint tokens.
      if (!ctx.keys.publicJwk) throw new AppError('JWKS_NOT_AVAILABLE');
      return { keys: [ctx.keys.publicJwk] };
    },
  );
}
