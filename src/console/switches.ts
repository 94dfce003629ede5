/**
 * "What is switched on": each flow a newcomer may look for, whether it is on, and the setting (with the
 * value) that turns it on. Booleans and setting names only: never a setting's value that could be a
 * secret. With zero set-up several flows the documentation describes are off (activation emails, lost
 * password, magic links…), and the console says so instead of leaving the person to guess.
 */
import type { Config } from '../config.ts';

export interface Switch {
  /** What a person calls it. */
  flow: string;
  on: boolean;
  /** The setting and the value that turns the flow on: `LOST_PASSWORD_ENABLED=true`. */
  turnOn: string;
  /** Further settings the flow needs, by name (a provider's client id and secret, say). */
  needs: string[];
  /** What the flow does, in a few words. */
  about: string;
}

/** The providers' settings, as config.ts checks them (providerChecks). */
const PROVIDERS: readonly { flow: string; prefix: string; needs: string[] }[] = [
  { flow: 'GitHub', prefix: 'GITHUB', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'Google', prefix: 'GOOGLE', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'Facebook', prefix: 'FACEBOOK', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'Twitter', prefix: 'TWITTER', needs: ['CONSUMER_KEY', 'CONSUMER_SECRET'] },
  { flow: 'LinkedIn', prefix: 'LINKEDIN', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'Apple', prefix: 'APPLE', needs: ['CLIENT_ID', 'TEAM_ID', 'KEY_ID', 'PRIVATE_KEY'] },
  { flow: 'Windows Live', prefix: 'WINDOWS_LIVE', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'Spotify', prefix: 'SPOTIFY', needs: ['CLIENT_ID', 'CLIENT_SECRET'] },
  { flow: 'OpenID Connect', prefix: 'OIDC', needs: ['ISSUER', 'CLIENT_ID', 'CLIENT_SECRET'] },
];

/** The flows of the service with their switches. */
export function switches(config: Config): { flows: Switch[]; providers: Switch[] } {
  // A flow that sends email needs emails on; say so beside it rather than show it on and silent.
  const mail = config.EMAILS_ENABLED ? [] : ['EMAILS_ENABLED=true'];
  const flag = (
    flow: string,
    setting: keyof Config & string,
    about: string,
    needs: string[] = [],
  ): Switch => ({ flow, on: config[setting] === true, turnOn: `${setting}=true`, needs, about });
  const flows: Switch[] = [
    {
      flow: 'Emails',
      on: config.EMAILS_ENABLED,
      turnOn: 'EMAILS_ENABLED=true',
      needs: [],
      about: config.SMTP_HOST
        ? 'Sent through SMTP_HOST.'
        : 'Written to the outbox (DATA_DIR/outbox) while SMTP_HOST is unset.',
    },
    flag('Sign-up with email and password', 'AUTH_LOCAL_USERS_ENABLED', 'POST /auth/register.'),
    {
      flow: 'Activation emails',
      on: !config.AUTO_ACTIVATE_NEW_USERS,
      turnOn: 'AUTO_ACTIVATE_NEW_USERS=false',
      needs: mail,
      about: 'A new account waits for the link emailed to it (otherwise it is active at once).',
    },
    flag('Lost password', 'LOST_PASSWORD_ENABLED', 'A reset link by email.', mail),
    flag('Magic links', 'MAGIC_LINK_ENABLED', 'Sign-up and sign-in by an emailed link.', mail),
    flag('Email codes', 'EMAIL_OTP_ENABLED', 'Sign-up and sign-in by a 6-digit code sent by email.', mail),
    flag('Email change', 'CHANGE_EMAIL_ENABLED', 'A signed-in person changes their address.'),
    flag(
      'Email change confirmation',
      'VERIFY_EMAILS',
      'The new address confirms the change by an emailed link.',
      mail,
    ),
    flag('Email change notice', 'NOTIFY_EMAIL_CHANGE', 'The old address is told of a change.', mail),
    flag('Two-factor sign-in (TOTP)', 'MFA_ENABLED', 'Codes from an authenticator app.'),
    flag(
      'Passkeys',
      'WEBAUTHN_ENABLED',
      'Sign up, sign in and confirm sensitive changes with a passkey (WebAuthn), on WEBAUTHN_RP_ID.',
    ),
    flag('Deleting one’s own account', 'ALLOW_USER_SELF_DELETE', 'POST /auth/delete.'),
    flag('Anonymous sign-in', 'ANONYMOUS_USERS_ENABLED', 'POST /auth/login with anonymous: true.'),
    flag(
      'Impersonation',
      'USER_IMPERSONATION_ENABLED',
      'An admin signs in as any user with x-admin-secret.',
      config.HASURA_GRAPHQL_ADMIN_SECRET ? [] : ['HASURA_GRAPHQL_ADMIN_SECRET'],
    ),
    flag('File storage', 'STORAGE_ENABLED', 'The /storage routes.'),
  ];
  const providers = PROVIDERS.map((p) =>
    flag(
      p.flow,
      `${p.prefix}_ENABLED` as keyof Config & string,
      `Sign-in at /auth/providers/${p.prefix === 'WINDOWS_LIVE' ? 'windowslive' : p.prefix.toLowerCase()}.`,
      p.needs.map((n) => `${p.prefix}_${n}`),
    ),
  );
  return { flows, providers };
}
