/**
 * GET /auth/magic-link?action=register|log-in&token=…[&cookie=false] — the link of a magic-link email.
 * Registered only when MAGIC_LINK_ENABLED (HBP left it open; the spec's ALLOW_USER_SELF_DELETE gate is a
 * documentation slip).
 */

import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { followMagicLink } from '../../mail/flows/magic-link.ts';
import { assertLinkTargetConfigured, linkFailed, linkSucceeded } from '../../mail/link-response.ts';
import { signInEvent } from '../../metrics/events.ts';
import { CookieFlag, errors, Session } from '../schemas.ts';

const Query = Type.Object(
  {
    token: Type.String({ format: 'uuid', description: 'The token from the email (single use).' }),
    action: Type.Union([Type.Literal('log-in'), Type.Literal('register')]),
    cookie: Type.Optional(CookieFlag),
  },
  { additionalProperties: false },
);

export async function magicLinkRoute(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  app.get<{ Querystring: Static<typeof Query> }>(
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
          ...errors(400, 401, 404, 500),
        },
      },
    },
    async (request, reply) => {
      const { token, action, cookie } = request.query;
      assertLinkTargetConfigured(ctx);
      const outcome = await followMagicLink(ctx, { token, action });
      signInEvent(
        'magic_link',
        !outcome ? 'invalid_code' : outcome.kind === 'mfa' ? 'mfa_required' : 'success',
      );
      if (!outcome) return linkFailed(ctx, reply, 'INVALID_TOKEN');
      return linkSucceeded(ctx, reply, outcome, cookie !== false);
    },
  );
}
