/**
 * POST /auth/logout: ends the sign-in of the presented refresh token (query `refresh_token`, else the
 * signed cookie) or, without one, the session the bearer access token names (`sid`); with `all: true`
 * every session of its account. The session cookies are cleared. The access tokens of every session
 * ended are refused at once, on every instance (auth/revocations.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { AppError, errorResponses } from '../../errors.ts';
import { callerAccount } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';
import { tokenFacts } from '../jwt.ts';
import { NoContent } from '../schemas.ts';
import { clearSessionCookies } from '../session-response.ts';
import { endAllSessions, endedBy, endSession, endSessionById, sessionOf } from '../sessions.ts';
import { bodyDefaultsToObject, presentedRefreshToken, requestClient } from './common.ts';

export const RefreshTokenQuery = Type.Object(
  { refresh_token: Type.Optional(Type.String({ maxLength: 512 })) },
  { additionalProperties: false },
);

export const logoutRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/logout',
    {
      schema: {
        tags: ['auth'],
        summary: 'Sign out (this sign-in, or everywhere with all: true)',
        querystring: RefreshTokenQuery,
        body: Type.Object(
          { all: Type.Optional(Type.Boolean({ description: 'true: end every session of the account.' })) },
          { additionalProperties: false },
        ),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 429) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const client = requestClient(request);
      const token = presentedRefreshToken(request, request.query);
      if (!token) {
        // No refresh token: the caller's access token names its session.
        const who = await request.identity();
        const sid = who && tokenFacts(who)?.sessionId;
        if (!who || sid === undefined) throw new AppError('INVALID_REFRESH_TOKEN');
        const account = await callerAccount(deps, who['user-id']);
        const own = { sessionId: sid, client };
        if (request.body.all === true)
          await endAllSessions(deps, account.id, undefined, deps.db, endedBy('sign_out_everywhere', own));
        else await endSessionById(deps, sid, account.id, deps.db, endedBy('logout', own));
        return reply.code(204).send(null);
      }
      // Cookies belong to the sign-in they carry: a token given in the query leaves them alone (§4.3)
      // unless they carry that very sign-in.
      if (token.cookieToo) clearSessionCookies(reply, deps.config);
      if (request.body.all === true) {
        const session = await sessionOf(deps, token.value);
        const own = { sessionId: session?.familyId, client };
        if (session)
          await endAllSessions(
            deps,
            session.accountId,
            undefined,
            deps.db,
            endedBy('sign_out_everywhere', own),
          );
      } else {
        await endSession(deps, token.value, endedBy('logout', { client }));
      }
      return reply.code(204).send(null);
    },
  );
};
