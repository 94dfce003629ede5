/**
 * The /auth route group. Each route lives in its own file (schema at the top, a short handler that calls
 * the domain); a route switched off by its setting is not registered, so it answers 404 like any unknown path
 * (it is still listed in /openapi.json, marked: http/switched-off.ts).
 * Public routes are registered here; routes for a signed-in caller in a context of their own, whose hook
 * authenticates the caller (and checks CSRF for cookie credentials) before any of their handlers runs.
 */
import type { FastifyPluginAsync } from 'fastify';
import { AppError } from '../../errors.ts';
import { signedInRoutes } from '../../http/identity.ts';
import { documentsOnly, gate, notServed, registerWhen } from '../../http/switched-off.ts';
import type { AuthDeps } from '../deps.ts';
import { mfaRoutes } from '../mfa/routes/index.ts';
import type { SecretBox } from '../mfa/secret-box.ts';
import type { ProviderRegistry } from '../oauth/registry.ts';
import { passkeyRoutes } from '../passkeys/routes/index.ts';
import { activateRoute } from './activate.ts';
import { changeEmailRoute } from './change-email.ts';
import { changePasswordRoute } from './change-password.ts';
import { deleteRoute } from './delete.ts';
import { emailRoutes } from './email-routes.ts';
import { hasuraWebhookRoute } from './hasura-webhook.ts';
import { jwksRoute } from './jwks.ts';
import { loginRoute } from './login.ts';
import { logoutRoute } from './logout.ts';
import { providerRoutes } from './providers/index.ts';
import { registerRoute } from './register.ts';
import { securityEventsRoute } from './security-events.ts';
import { sessionsRoutes } from './sessions.ts';
import { tokenRefreshRoute } from './token-refresh.ts';
import { tokenRevokeRoute } from './token-revoke.ts';

export const authRoutes: FastifyPluginAsync<{
  deps: AuthDeps;
  mfaBox: SecretBox | undefined;
  providers: ProviderRegistry;
}> = async (app, opts) => {
  const { deps } = opts;
  const c = deps.config;
  // Unknown and switched-off /auth paths answer inside this group, so they carry its no-cache headers too.
  app.setNotFoundHandler(async () => {
    throw new AppError('NOT_FOUND');
  });
  await app.register(registerRoute, { deps });
  await app.register(loginRoute, { deps });
  await app.register(logoutRoute, { deps });
  await app.register(activateRoute, { deps });
  await app.register(tokenRefreshRoute, { deps });
  await app.register(jwksRoute, { deps });
  await app.register(hasuraWebhookRoute, { deps });
  // Routes for the signed-in caller only: their context's hook authenticates (http/identity.ts).
  await app.register(
    signedInRoutes(async (signedIn) => {
      await signedIn.register(tokenRevokeRoute, { deps });
      await signedIn.register(sessionsRoutes, { deps });
      await signedIn.register(securityEventsRoute, { deps });
      await signedIn.register(changePasswordRoute, { deps });
      await registerWhen(signedIn, gate(c, { CHANGE_EMAIL_ENABLED: true, VERIFY_EMAILS: false }), (s) =>
        s.register(changeEmailRoute, { deps }),
      );
      await registerWhen(signedIn, gate(c, { ALLOW_USER_SELF_DELETE: true }), (s) =>
        s.register(deleteRoute, { deps }),
      );
    }),
  );
  if (c.MFA_ENABLED && !opts.mfaBox && !documentsOnly(app))
    throw new Error('MFA_ENABLED needs the MFA secret box of the context');
  await registerWhen(app, gate(c, { MFA_ENABLED: true }), (s) =>
    s.register(mfaRoutes, {
      deps: { ...deps, box: opts.mfaBox ?? notServed<SecretBox>('the MFA secret box') },
      prefix: '/mfa',
    }),
  );
  await registerWhen(app, gate(c, { WEBAUTHN_ENABLED: true }), (s) =>
    s.register(passkeyRoutes, { deps, prefix: '/passkeys' }),
  );
  await app.register(emailRoutes, { deps });
  await app.register(providerRoutes, { deps, mfaBox: opts.mfaBox, registry: opts.providers });
};
