/**
 * GET /auth/security-events: the signed-in caller's security feed, newest first (sign-ins, failed
 * guesses, sessions ended, password, email, MFA and provider changes). Only the caller's own events; the
 * `before` cursor is one of their event ids, anything else is 400 (never a page of someone else's feed).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../errors.ts';
import { FEED_LIMIT_DEFAULT, FEED_LIMIT_MAX, securityFeed } from '../../events/feed.ts';
import { ACCOUNT_EVENT_TYPES } from '../../events/types.ts';
import { callerAccount } from '../accounts.ts';
import type { AuthDeps } from '../deps.ts';

const Nullable = (description: string) => Type.Union([Type.String(), Type.Null()], { description });

export const SecurityEvent = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The event id (pass it as `before` for the next page).' }),
  type: Type.String({ description: `One of ${ACCOUNT_EVENT_TYPES.join(', ')}.` }),
  created_at: Type.String({ format: 'date-time' }),
  ip: Nullable('The client address of the request that caused it (null: the operator, a background step).'),
  user_agent: Nullable('The User-Agent of that request.'),
  session_id: Nullable('The session it came from, or the one a sign-in began.'),
  details: Type.Record(Type.String(), Type.Unknown(), {
    description:
      'By type: sign_in {method}, sign_in_failed {reason}, session_ended {reason, sessions}, email_changed {confirmed}, provider_linked/unlinked {provider}, account_disabled {by}, passkey_added/removed/clone_detected {passkey, name}; an operator\'s change (admin_*) names the credential in by: {via: "admin-secret" | "admin-role" (with user_id) | "cli"}.',
  }),
});

export const securityEventsRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/security-events',
    {
      schema: {
        tags: ['auth'],
        summary: "The signed-in user's security feed, newest first",
        security: [{ bearer: [] }],
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
        response: { 200: Type.Array(SecurityEvent), ...errorResponses(400, 401, 403, 429, 503) },
      },
    },
    async (request) => {
      const account = await callerAccount(deps, request.user['user-id']);
      return securityFeed(deps.db, account.id, request.query);
    },
  );
};
