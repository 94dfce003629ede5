/**
 * GET /auth/oauth2/grants: the clients the signed-in person allowed. DELETE /auth/oauth2/grants/{client_id}:
 * withdraws one (its refresh tokens refused, its access tokens in the revoked list at once).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { tokenFacts } from '../../jwt.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { listGrants, revokeGrant } from '../grants.ts';

const Grant = Type.Object({
  client_id: Type.String(),
  client_name: Type.String(),
  scopes: Type.Array(Type.String()),
  resources: Type.Array(Type.String()),
  created_at: Type.String(),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
});

export const grantsRoutes: FastifyPluginAsyncTypebox<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  app.get(
    '/grants',
    {
      schema: {
        tags: ['oauth2'],
        summary: 'The applications (OAuth clients) you allowed, with scopes, resources and last use',
        response: { 200: Type.Array(Grant), ...errorResponses(401) },
      },
    },
    async (request) => listGrants(deps, request.user['user-id']),
  );
  app.delete(
    '/grants/:client_id',
    {
      schema: {
        tags: ['oauth2'],
        summary: "Withdraws an application's access: its tokens stop working at once",
        params: Type.Object({ client_id: Type.String({ minLength: 1, maxLength: 2048 }) }),
        response: { 204: Type.Null(), ...errorResponses(401, 404) },
      },
    },
    async (request, reply) => {
      const ua = request.headers['user-agent'];
      await revokeGrant(deps, request.user['user-id'], request.params.client_id, {
        sessionId: tokenFacts(request.user)?.sessionId,
        client: { ip: request.ip, userAgent: typeof ua === 'string' ? ua : null },
      });
      return reply.code(204).send(null);
    },
  );
};
