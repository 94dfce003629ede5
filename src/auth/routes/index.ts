/**
 * The /auth route group. Each route lives in its own file (schema at the top, a short handler that calls
 * the domain); a route switched off by its setting is not registered, so it answers 404 like any unknown path.
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { mfaRoutes } from '../mfa/routes/index.ts';
import { ensureAuthSchema } from '../startup.ts';
import { activateRoute } from './activate.ts';
import { changeEmailRoute } from './change-email.ts';
import { changePasswordRoute } from './change-password.ts';
import { deleteRoute } from './delete.ts';
import { emailRoutes } from './email-routes.ts';
import { jwksRoute } from './jwks.ts';
import { loginRoute } from './login.ts';
import { logoutRoute } from './logout.ts';
import { providerRoutes } from './providers/index.ts';
import { registerRoute } from './register.ts';
import { tokenRefreshRoute } from './token-refresh.ts';
import { tokenRevokeRoute } from './token-revoke.ts';

export async function authRoutes(app: FastifyInstance, opts: { ctx: AppContext }): Promise<void> {
  const c = opts.ctx.config;
  await ensureAuthSchema(opts.ctx);
  // Unknown and switched-off /auth paths answer inside this group, so they carry its no-cache headers too.
  app.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND');
  });
  await app.register(registerRoute, opts);
  await app.register(loginRoute, opts);
  await app.register(logoutRoute, opts);
  await app.register(activateRoute, opts);
  await app.register(tokenRefreshRoute, opts);
  await app.register(tokenRevokeRoute, opts);
  await app.register(changePasswordRoute, opts);
  await app.register(jwksRoute, opts);
  if (c.CHANGE_EMAIL_ENABLED && !c.VERIFY_EMAILS) await app.register(changeEmailRoute, opts);
  if (c.ALLOW_USER_SELF_DELETE) await app.register(deleteRoute, opts);
  if (c.MFA_ENABLED) await app.register(mfaRoutes, { ...opts, prefix: '/mfa' });
  await app.register(emailRoutes, opts);
  await app.register(providerRoutes, opts);
}
