/**
 * GET /auth/hasura: the GraphQL engine's auth webhook (docs/hasura.md). The engine calls it for every
 * request with the client's headers; the access token is checked as on every signed-in route, the revoked
 * list included, so ended sessions and blocked accounts lose GraphQL access at once.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { hasuraSession } from '../../hasura/webhook.ts';
import type { AuthDeps } from '../deps.ts';

export const hasuraWebhookRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/hasura',
    {
      schema: {
        tags: ['auth'],
        summary: 'Auth webhook for Hasura (HASURA_GRAPHQL_AUTH_HOOK, GET mode)',
        description:
          "Answers the session variables of the request's access token (values are strings): `X-Hasura-Role` is the `x-hasura-role` header when the token allows it, else the default role. 401 for a revoked, expired or forged token, a role the token does not allow, and no token (unless `HASURA_WEBHOOK_ANONYMOUS_ROLE` is set).",
        security: [{ bearer: [] }],
        response: {
          200: Type.Record(Type.String(), Type.String(), {
            description: 'Session variables, such as X-Hasura-User-Id and X-Hasura-Role.',
          }),
          ...errorResponses(401, 503),
        },
      },
      // The engine calls from one address for every user: the per-address limit would throttle them all.
      config: { rateLimit: false },
    },
    async (request) => {
      const role = request.headers['x-hasura-role'];
      return hasuraSession(
        await request.identity(),
        typeof role === 'string' && role !== '' ? role : undefined,
        deps.config.HASURA_WEBHOOK_ANONYMOUS_ROLE,
      );
    },
  );
};
