/**
 * What the auth domain needs from outside, built once by the composition root (context.ts, app.ts) and
 * passed in. Each domain function names the part it uses, so that reading a signature tells what the
 * function can touch: a password check cannot send an email, a session cannot schedule work.
 */
import type { BackgroundTasks } from '../background.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { MailPort } from '../mail/port.ts';
import type { JwtKeys } from './keys.ts';

export interface AuthDeps {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
  readonly keys: JwtKeys;
  /** Where account flows hand their emails, inside their transaction (mail/port.ts). */
  readonly mailer: MailPort;
  /** Work after the response, for flows that answer the same for every address. */
  readonly tasks: BackgroundTasks;
}

/** Settings and the time: checks that read no data (reauth windows, domains, link targets). */
export type ConfigDeps = Pick<AuthDeps, 'config' | 'clock'>;

/** Sign-in, sessions and account changes that send no email. */
export type SessionDeps = Pick<AuthDeps, 'config' | 'db' | 'clock' | 'keys'>;

/** Account changes that email someone within the request (email change). */
export type MailingDeps = SessionDeps & Pick<AuthDeps, 'mailer'>;
