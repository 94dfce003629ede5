/** GET /auth/jwks: the public key that verifies access tokens (asymmetric algorithms only). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';

const Jwks = Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) });

export const jwksRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/jwks',
    {
      schema: {
        tags: ['auth'],
        summary: 'JSON Web Key Set of the access-token key (501 with an HS* shared secret)',
        response: { 200: Jwks, ...errorResponses(429, 501) },
      },
    },
    async () => {
      // A shared secret has no public half; publishing it would let anyone mint tokens.
      if (!deps.keys.publicJwk) throw new AppError('JWKS_NOT_AVAILABLE');
      return { keys: [deps.keys.publicJwk] };
    },
  );
};
