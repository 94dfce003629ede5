/**
 * GET /auth/jwks: the public keys that verify access tokens (asymmetric algorithms only): the current key,
 * and during a rotation the retired one beside it until the tokens it signed have expired.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { allPublishedJwks } from '../oauth-server/keys.ts';

const Jwks = Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) });

export const jwksRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/jwks',
    {
      schema: {
        tags: ['auth'],
        summary: 'JSON Web Key Set of the access-token keys (501 with an HS* shared secret)',
        response: { 200: Jwks, ...errorResponses(429, 501) },
      },
    },
    async (_request, reply) => {
      // A shared secret has no public half; publishing it would let anyone mint tokens.
      if (!deps.keys.publicJwk && !deps.oauthKeys?.extraJwks.length) throw new AppError('JWKS_NOT_AVAILABLE');
      // Cacheable: Hasura schedules its JWKS refreshes from max-age, and never refreshes on no-store.
      // A rotation publishes the new key this long before it signs (JWT_KEY_ROTATED_AT).
      reply.header('cache-control', `public, max-age=${deps.config.JWKS_MAX_AGE}`);
      return { keys: allPublishedJwks(deps.keys, deps.oauthKeys, deps.clock.now()) };
    },
  );
};
