/** GET /auth/jwks: the public key that verifies access tokens (asymmetric algorithms only). */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { errors } from '../schemas.ts';

const Jwks = Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) });

export async function jwksRoute(app: FastifyInstance, { deps }: { deps: AuthDeps }): Promise<void> {
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
      if (!deps.keys.publicJwk) throw new AppError('JWKS_NOT_AVAILABLE');
      return { keys: [deps.keys.publicJwk] };
    },
  );
}
