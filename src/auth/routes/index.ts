/**
 * The /auth route group. Each route lives in its own file (schema at the top, a short handler that calls
 * the domain); a route switched off by its setting is not registered, so it answers 404 like any unknown path.
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { emailRoutes } from './email-routes.ts';

export async function authRoutes(app: FastifyInstance, opts: { ctx: AppContext }): Promise<void> {
  // Routes are added by the accounts, email and MFA work.
  await app.register(emailRoutes, opts);
}
