/**
 * What the auth domain needs from outside, built once by the composition root (context.ts, app.ts) and
 * passed in. Each domain function names the part it uses, so that reading a signature tells what the
 * function can touch: a password check cannot send an email.
 */
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { MailPort } from '../mail/port.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';
import type { JwtKeys } from './keys.ts';
import type { Passwords } from './passwords.ts';
import type { Revocations } from './revocations.ts';

export interface AuthDeps {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
  readonly keys: JwtKeys;
  /** This instance's password hashing threads. */
  readonly passwords: Passwords;
  /**
   * Where account flows hand their emails, inside their transaction, and the steps that must run after
   * the response (mail/port.ts: the durable outbox).
   */
  readonly mailer: MailPort;
  /** This instance's revoked list: ending a session applies to it at commit (revocations.ts). */
  readonly revocations: Revocations;
  /** Queues webhook deliveries in the change's transaction (webhooks/webhooks.ts). */
  readonly webhooks: Webhooks;
}

/** Settings and the time: checks that read no data (domains, link targets). */
export type ConfigDeps = Pick<AuthDeps, 'config' | 'clock'>;

/** Re-authentication: the sign-in window, or the current password checked by the hashing threads. */
export type ReauthDeps = ConfigDeps & Pick<AuthDeps, 'passwords'>;

/** Sign-in, sessions and account changes that send no email. */
export type SessionDeps = Pick<AuthDeps, 'config' | 'db' | 'clock' | 'keys' | 'passwords' | 'revocations'> &
  Partial<Pick<AuthDeps, 'webhooks'>>;

/** Account changes that email someone within the request (email change). */
export type MailingDeps = SessionDeps & Pick<AuthDeps, 'mailer'>;
