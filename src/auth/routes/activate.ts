/**
 * GET /auth/activate?ticket=…: activates an account from its emailed link and redirects to
 * REDIRECT_URL_SUCCESS with `refresh_token` added. A bad ticket redirects to REDIRECT_URL_ERROR, or
 * answers 401 when that is not set. `cookie=false` skips the session cookies (HBP's schema refused it).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import type { AuthDeps } from '../deps.ts';
import { activateWithTicket } from '../flows/registration.ts';
import { CookieFlag, Session, Ticket } from '../schemas.ts';
import { requestClient } from './common.ts';
import { assertLinkTargetConfigured, linkFailed, linkSucceeded } from './link-response.ts';

export const activateRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/activate',
    {
      schema: {
        tags: ['auth'],
        summary: 'Activate an account from its emailed ticket (302 redirect)',
        querystring: Type.Object(
          { ticket: Ticket, cookie: Type.Optional(CookieFlag) },
          { additionalProperties: false },
        ),
        response: {
          200: { ...Session, description: 'Only without REDIRECT_URL_SUCCESS (development): the session.' },
          302: Type.Null({ description: 'Redirect to REDIRECT_URL_SUCCESS or REDIRECT_URL_ERROR' }),
          ...errorResponses(400, 401, 429, 500),
        },
      },
    },
    async (request, reply) => {
      assertLinkTargetConfigured(deps);
      const activated = await activateWithTicket(deps, request.query.ticket, requestClient(request));
      if (!activated) return linkFailed(deps, reply, 'INVALID_TICKET');
      // 302 to redirect_to (from registration) or REDIRECT_URL_SUCCESS; with neither, the session as JSON.
      return linkSucceeded(deps, reply, { kind: 'session', ...activated }, request.query.cookie ?? true);
    },
  );
};
