/**
 * GET /auth/jwks: the public keys that verify access tokens (asymmetric algorithms only): the current key,
 * and during a rotation the retired one beside it until the tokens it signed have expired.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { publishedJwks } from '../keys.ts';
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
    async (_request, reply) => {
      // A shared secret has no public half; publishing it would let anyone mint tokens.
      if (!ctx.keys.publicJwk) throw new AppError('JWKS_NOT_AVAILABLE');
      // Cacheable: Hasura schedules its JWKS refreshes from max-age, and never refreshes on no-store.
      // A rotation publishes the new key this long before it signs (JWT_KEY_ROTATED_AT).
      reply.header('cache-control', `public, max-age=${ctx.config.JWKS_MAX_AGE}`);
      return { keys: publishedJwks(ctx.keys, ctx.clock.now()) };
    },
  );
}
