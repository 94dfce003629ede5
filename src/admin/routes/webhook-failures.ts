/**
 * GET /admin/webhooks/failed: the webhook deliveries given up after WEBHOOK_MAX_ATTEMPTS, newest first,
 * as `gatehouse webhooks list-failed` shows them (the same store function).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { errorResponses } from '../../errors.ts';
import { failedWebhooks } from '../emails.ts';

export const webhookFailuresRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/webhooks/failed',
    {
      schema: {
        summary: 'Webhook deliveries given up',
        description:
          'Newest first: the event type, its webhook-id, the receiver, the attempts and the last error. The body sent is not shown. Kept EMAIL_FAILED_RETENTION_HOURS.',
        querystring: Type.Object(
          { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Array(
            Type.Object({
              webhook_id: Type.Union([Type.String(), Type.Null()]),
              type: Type.Union([Type.String(), Type.Null()]),
              url: Type.Union([Type.String(), Type.Null()]),
              attempts: Type.Integer(),
              created_at: Type.String({ format: 'date-time' }),
              failed_at: Type.String({ format: 'date-time' }),
              last_error: Type.Union([Type.String(), Type.Null()]),
            }),
          ),
          ...errorResponses(400, 401, 403, 429, 503),
        },
      },
    },
    async (request) =>
      (await failedWebhooks(deps, request.query.limit ?? 50)).map((r) => ({
        webhook_id: r.delivery_id,
        type: r.template,
        url: r.recipient,
        attempts: r.attempts,
        created_at: r.created_at.toISOString(),
        failed_at: r.failed_at.toISOString(),
        last_error: r.last_error,
      })),
  );
};
