/**
 * GET /auth/token/refresh: rotates a refresh token into a new session. From the query parameter (which
 * wins over the cookie) the new refresh token comes back in the body, and also as a new cookie when the
 * cookie held the same token; from the cookie it comes back as a new cookie.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AppError, errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { Session } from '../schemas.ts';
import { sendSession, setSessionCookies } from '../session-response.ts';
import { refreshSession } from '../sessions.ts';
import { presentedRefreshToken } from './common.ts';
import { RefreshTokenQuery } from './logout.ts';

export const tokenRefreshRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  const c = deps.config;
  app.get(
    '/token/refresh',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange a refresh token for a new session (rotation)',
        querystring: RefreshTokenQuery,
        response: { 200: Session, ...errorResponses(400, 401, 429) },
      },
      preHandler: async (request) => {
        await app.limiter.consume(
          `refresh:ip:${request.ip}`,
          c.RATE_LIMIT_REFRESH_MAX,
          c.RATE_LIMIT_REFRESH_WINDOW,
        );
      },
    },
    async (request, reply) => {
      const token = presentedRefreshToken(request, request.query);
      if (!token) throw new AppError('INVALID_REFRESH_TOKEN');
      const session = await refreshSession(deps, token.value);
      const fromCookie = token.source === 'cookie';
      const now = deps.clock.now();
      const body = sendSession(reply, c, session, fromCookie, now, { leaveCookies: !fromCookie });
      // The query named the cookie's own token: the cookie follows the rotation too.
      if (!fromCookie && token.cookieToo) setSessionCookies(reply, c, session, now);
      return body;
    },
  );
};
