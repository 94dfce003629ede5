/** GET /admin/emails: the newest emails of the durable outbox, sent, waiting or given up. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { errorResponses } from '../../errors.ts';
import { recentEmails } from '../emails.ts';

const NullableTime = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);

export const emailsRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/emails',
    {
      schema: {
        summary: 'The email outbox: what was sent, what waits, what failed',
        description:
          'Newest first. Recipient, template and delivery state only: the message (and the link it carries) is never shown. Sent emails are kept EMAIL_SENT_RETENTION_HOURS.',
        querystring: Type.Object(
          { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Array(
            Type.Object({
              id: Type.String(),
              template: Type.String(),
              recipient: Type.String(),
              status: Type.Union([Type.Literal('sent'), Type.Literal('pending'), Type.Literal('failed')]),
              attempts: Type.Integer(),
              created_at: Type.String({ format: 'date-time' }),
              sent_at: NullableTime,
              failed_at: NullableTime,
              last_error: Type.Union([Type.String(), Type.Null()]),
            }),
          ),
          ...errorResponses(400, 401, 403, 429, 503),
        },
      },
    },
    async (request) =>
      (await recentEmails(deps, request.query.limit ?? 50)).map((e) => ({
        ...e,
        status: e.sent_at ? ('sent' as const) : e.failed_at ? ('failed' as const) : ('pending' as const),
        created_at: e.created_at.toISOString(),
        sent_at: e.sent_at?.toISOString() ?? null,
        failed_at: e.failed_at?.toISOString() ?? null,
      })),
  );
};
