/**
 * The email-flow routes, each registered only when its settings make it usable (an unregistered route
 * answers 404 like any unknown path). Routes whose only job is to send an email also need EMAILS_ENABLED.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../http/identity.ts';
import { gate, registerWhen } from '../../http/switched-off.ts';
import type { AuthDeps } from '../deps.ts';
import { activateResendRoute } from './activate-resend.ts';
import { changeEmailChangeRoute } from './change-email-change.ts';
import { changeEmailRequestRoute } from './change-email-request.ts';
import { changePasswordChangeRoute } from './change-password-change.ts';
import { changePasswordRequestRoute } from './change-password-request.ts';
import { magicLinkRoute } from './magic-link.ts';
import { emailOtpRoutes } from './otp-email.ts';

export const emailRoutes: FastifyPluginAsync<{ deps: AuthDeps }> = async (app, opts) => {
  const c = opts.deps.config;
  // The mailer sends when EMAILS_ENABLED is on (mail/mailer.ts).
  const mail = opts.deps.mailer.sends ? [] : ['EMAILS_ENABLED=true'];
  await registerWhen(app, gate(c, { MAGIC_LINK_ENABLED: true }), (s) => s.register(magicLinkRoute, opts));
  await registerWhen(app, gate(c, { EMAIL_OTP_ENABLED: true }, mail), (s) =>
    s.register(emailOtpRoutes, opts),
  );
  // Resending is for accounts waiting for their link: activation emails, or magic links.
  const resend = c.MAGIC_LINK_ENABLED ? gate(c, {}, mail) : gate(c, { AUTO_ACTIVATE_NEW_USERS: false }, mail);
  await registerWhen(app, resend, (s) => s.register(activateResendRoute, opts));
  const changeEmail = { CHANGE_EMAIL_ENABLED: true, VERIFY_EMAILS: true };
  await registerWhen(app, gate(c, changeEmail, mail), (s) =>
    s.register(signedInRoutes(async (signedIn) => signedIn.register(changeEmailRequestRoute, opts))),
  );
  await registerWhen(app, gate(c, changeEmail), (s) => s.register(changeEmailChangeRoute, opts));
  await registerWhen(app, gate(c, { LOST_PASSWORD_ENABLED: true }, mail), (s) =>
    s.register(changePasswordRequestRoute, opts),
  );
  await registerWhen(app, gate(c, { LOST_PASSWORD_ENABLED: true }), (s) =>
    s.register(changePasswordChangeRoute, opts),
  );
};
