/**
 * The admin API under `/admin` (docs/admin.md): every route in one admin context (guard.ts), so none can
 * be registered without the check. Each handler calls the account functions the `gatehouse users`
 * commands call (auth/operator.ts).
 */
import type { FastifyPluginAsync } from 'fastify';
import type { AuthDeps } from '../../auth/deps.ts';
import { NO_CACHE_HEADERS } from '../../http/security.ts';
import { adminContext } from '../guard.ts';
import { createUserRoute } from './create-user.ts';
import { deleteUserRoute } from './delete-user.ts';
import { emailsRoute } from './emails.ts';
import { getUserRoute } from './get-user.ts';
import { listUsersRoute } from './list-users.ts';
import { signOutUserRoute } from './sign-out-user.ts';
import { updateUserRoute } from './update-user.ts';
import { userLinksRoute } from './user-links.ts';
import { userSecurityEventsRoute } from './user-security-events.ts';
import { userSessionsRoute } from './user-sessions.ts';
import { webhookFailuresRoute } from './webhook-failures.ts';

export const adminRoutes: FastifyPluginAsync<{ deps: AuthDeps }> = async (app, { deps }) => {
  adminContext(app, deps.config);
  // Answers about accounts, and links that are credentials: nothing here is kept by a cache.
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(NO_CACHE_HEADERS);
  });
  for (const route of [
    listUsersRoute,
    getUserRoute,
    createUserRoute,
    updateUserRoute,
    deleteUserRoute,
    signOutUserRoute,
    userLinksRoute,
    userSessionsRoute,
    userSecurityEventsRoute,
    emailsRoute,
    webhookFailuresRoute,
  ])
    await app.register(route, { deps });
};
