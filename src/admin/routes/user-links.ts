/** POST /admin/users/{id}/links: a password-reset, magic-link or activation link, shown or emailed. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser, userLink } from '../../auth/operator.ts';
import { errorResponses } from '../../errors.ts';
import { UserIdParams } from '../schemas.ts';

export const userLinksRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/users/:id/links',
    {
      schema: {
        summary: 'Make a sign-in link for a user (support)',
        description:
          'A real single-use link, as the flow’s email carries (the account’s earlier links of that type stop working). `send: true` emails it to the account’s address as the flow does (EMAILS_ENABLED); otherwise it is only returned, for you to hand over on a channel you trust: whoever holds it gets in. 409 LINK_NOT_AVAILABLE when the account cannot use it (disabled; not active, or already active for `activation`; the flow switched off: LOST_PASSWORD_ENABLED, MAGIC_LINK_ENABLED).',
        params: UserIdParams,
        body: Type.Object(
          {
            type: Type.Union([
              Type.Literal('password-reset'),
              Type.Literal('magic-link'),
              Type.Literal('activation'),
            ]),
            send: Type.Optional(Type.Boolean({ default: false })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            url: Type.String({ description: 'The link.' }),
            expires_at: Type.String({ format: 'date-time' }),
            sent: Type.Boolean({ description: 'Emailed to the account’s address.' }),
          }),
          ...errorResponses(400, 401, 403, 404, 409, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const account = await accountOfUser(deps.db, request.params.id);
      const send = request.body.send ?? false;
      const { link, expiresAt } = await userLink(
        deps,
        account,
        { type: request.body.type, send },
        request.operator,
      );
      // The link is a credential: never kept by a cache on the way.
      reply.header('cache-control', 'no-store');
      return { url: link, expires_at: expiresAt.toISOString(), sent: send };
    },
  );
};
