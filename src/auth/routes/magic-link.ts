/**
 * GET /auth/magic-link?action=register|log-in&token=…[&cookie=false] — the link of a magic-link email.
 * Registered only when MAGIC_LINK_ENABLED (HBP left it open; the spec's ALLOW_USER_SELF_DELETE gate is a
 * documentation slip).
 */

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { signInEvent } from '../../metrics/events.ts';
import type { AuthDeps } from '../deps.ts';
import { followMagicLink } from '../flows/magic-link.ts';
import { CookieFlag, Session } from '../schemas.ts';
import { requestClient } from './common.ts';
import { assertLinkTargetConfigured, linkFailed, linkSucceeded } from './link-response.ts';

const Query = Type.Object(
  {
    token: Type.String({ format: 'uuid', description: 'The token from the email (single use).' }),
    action: Type.Union([Type.Literal('log-in'), Type.Literal('register')]),
    cookie: Type.Optional(CookieFlag),
  },
  { additionalProperties: false },
);

export const magicLinkRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/magic-link',
    {
      schema: {
        summary: 'Follow a magic link: 302 to REDIRECT_URL_SUCCESS (or redirect_to) with refresh_token',
        tags: ['auth', 'email'],
        querystring: Query,
        response: {
          200: Type.Union([Session, Type.Object({ mfa: Type.Literal(true), ticket: Type.String() })], {
            description: 'Only without REDIRECT_URL_SUCCESS (development): the session as JSON.',
          }),
          302: Type.Null({ description: 'Redirect to the success (or error) URL' }),
          ...errorResponses(400, 401, 404, 500),
        },
      },
    },
    async (request, reply) => {
      const { token, action, cookie } = request.query;
      assertLinkTargetConfigured(deps);
      const outcome = await followMagicLink(deps, { token, action, client: requestClient(request) });
      signInEvent(
        'magic_link',
        !outcome ? 'invalid_code' : outcome.kind === 'mfa' ? 'mfa_required' : 'success',
      );
      if (!outcome) return linkFailed(deps, reply, 'INVALID_TOKEN');
      return linkSucceeded(deps, reply, outcome, cookie !== false);
    },
  );
};
