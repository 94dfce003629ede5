/** GET /admin/users/{id}/security-events: the user's security feed, as its owner sees it, newest first. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser } from '../../auth/operator.ts';
import { SecurityEvent } from '../../auth/routes/security-events.ts';
import { errorResponses } from '../../errors.ts';
import { FEED_LIMIT_DEFAULT, FEED_LIMIT_MAX, securityFeed } from '../../events/feed.ts';
import { UserIdParams } from '../schemas.ts';

export const userSecurityEventsRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (
  app,
  { deps },
) => {
  app.get(
    '/users/:id/security-events',
    {
      schema: {
        summary: 'A user’s security feed, newest first',
        description:
          'What GET /auth/security-events shows the user: sign-ins, failed guesses, sessions ended, password, email, MFA and provider changes, and every operator change (admin_* types, with the credential in details.by).',
        params: UserIdParams,
        querystring: Type.Object(
          {
            limit: Type.Optional(
              Type.Integer({ minimum: 1, maximum: FEED_LIMIT_MAX, default: FEED_LIMIT_DEFAULT }),
            ),
            before: Type.Optional(
              Type.String({ maxLength: 100, description: 'The id of the last event of the previous page.' }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(SecurityEvent), ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => {
      const account = await accountOfUser(deps.db, request.params.id);
      return securityFeed(deps.db, account.id, request.query);
    },
  );
};
