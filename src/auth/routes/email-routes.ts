/**
 * The email-flow routes, each registered only when its settings make it usable (an unregistered route
 * answers 404 like any unknown path). Routes whose only job is to send an email also need EMAILS_ENABLED.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../http/identity.ts';
import type { AuthDeps } from '../deps.ts';
import { activateResendRoute } from './activate-resend.ts';
import { changeEmailChangeRoute } from './change-email-change.ts';
import { changeEmailRequestRoute } from './change-email-request.ts';
import { changePasswordChangeRoute } from './change-password-change.ts';
import { changePasswordRequestRoute } from './change-password-request.ts';
import { magicLinkRoute } from './magic-link.ts';

export const emailRoutes: FastifyPluginAsync<{ deps: AuthDeps }> = async (app, opts) => {
  const c = opts.deps.config;
  const sends = opts.deps.mailer.sends;
  if (c.MAGIC_LINK_ENABLED) await app.register(magicLinkRoute, opts);
  if (sends && (!c.AUTO_ACTIVATE_NEW_USERS || c.MAGIC_LINK_ENABLED))
    await app.register(activateResendRoute, opts);
  if (c.CHANGE_EMAIL_ENABLED && c.VERIFY_EMAILS) {
    if (sends) {
      await app.register(
        signedInRoutes(async (signedIn) => signedIn.register(changeEmailRequestRoute, opts)),
      );
    }
    await app.register(changeEmailChangeRoute, opts);
  }
  if (c.LOST_PASSWORD_ENABLED) {
    if (sends) await app.register(changePasswordRequestRoute, opts);
    await app.register(changePasswordChangeRoute, opts);
  }
};
