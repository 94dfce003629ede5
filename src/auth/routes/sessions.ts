/**
 * GET /auth/sessions and DELETE /auth/sessions/{id}: the signed-in caller sees where they are signed in
 * and ends a session (a lost phone). Ending one refuses its access tokens at once on every instance, not
 * only its refresh token. Another account's, an unknown or a malformed id is 404: never 403, which would
 * confirm that someone else's session exists.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { callerAccount } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { tokenFacts } from '../jwt.ts';
import { NoContent } from '../schemas.ts';
import { endOwnSession, listSessions } from '../sessions.ts';
import { ownSignIn } from './common.ts';

const Nullable = (description: string) => Type.Union([Type.String(), Type.Null()], { description });

const SessionItem = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The session id: the `sid` of its access tokens.' }),
  current: Type.Boolean({ description: "true for the caller's own session." }),
  created_at: Type.String({ format: 'date-time', description: 'When the sign-in happened.' }),
  last_active_at: Type.String({ format: 'date-time', description: 'The last sign-in or refresh.' }),
  expires_at: Type.String({ format: 'date-time', description: 'When its refresh token expires.' }),
  sign_in_method: Nullable(
    'password, magic-link, mfa, oauth:<provider>, passkey, anonymous; null for a session older than this field.',
  ),
  user_agent: Nullable('The User-Agent of the sign-in.'),
  ip: Nullable('The client address of the sign-in (as TRUST_PROXY lets the service see it).'),
});

export const sessionsRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/sessions',
    {
      schema: {
        tags: ['auth'],
        summary: "The signed-in user's sessions, newest first",
        security: [{ bearer: [] }],
        response: { 200: Type.Array(SessionItem), ...errorResponses(401, 403, 429, 503) },
      },
    },
    async (request) => {
      const account = await callerAccount(deps, request.user['user-id']);
      return listSessions(deps, account.id, tokenFacts(request.user)?.sessionId);
    },
  );

  app.delete(
    '/sessions/:id',
    {
      schema: {
        tags: ['auth'],
        summary: 'End one of the signed-in user’s sessions',
        description:
          'Its refresh tokens stop working and its access tokens are refused at once. 404 for an id that is not one of your sessions.',
        security: [{ bearer: [] }],
        params: Type.Object({ id: Type.String({ maxLength: 100 }) }),
        response: { 204: NoContent, ...errorResponses(401, 403, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const account = await callerAccount(deps, request.user['user-id']);
      await endOwnSession(deps, account.id, request.params.id, ownSignIn(request));
      return reply.code(204).send(null);
    },
  );
};
