/**
 * Proof beyond a bearer token for sensitive changes. An access token proves a session, not the person
 * holding it: stolen (an XSS, a log line, a shared machine) it works until it expires, and must not be
 * enough to take the account for good (move its email, then reset the password there) or to lock the
 * owner out (turn MFA on with the thief's secret). The sensitive changes are listed in docs/auth.md
 * ("Sensitive changes"); each calls `assertReauthenticated`, which accepts either
 * - the current password sent with the request (`password`), checked under the same failure limit as
 *   `POST /auth/login`, or
 * - a sign-in within SENSITIVE_ACTION_WINDOW seconds, read from the access token's `auth_time`: the
 *   instant of the sign-in that started the session, which refreshing never moves (sessions.ts).
 */
import { AppError } from '../errors.ts';
import { type GuessLimiter, passwordSubject } from '../http/guesses.ts';
import type { AccountRow } from './accounts-store.ts';
import type { ConfigDeps, ReauthDeps } from './deps.ts';

/** What a request offers as proof. */
export interface Reauthentication {
  /** `auth_time` (seconds) of the access token that authenticated the request, when it has one. */
  readonly authTime?: number;
  /** The current password, when the client sent one. */
  readonly password?: string;
  /** Wrong passwords count against the sign-in guess limits (http/guesses.ts), for this client address. */
  readonly guesses: GuessLimiter;
  readonly address: string;
}

/** The account making the change. */
export type ReauthSubject = Pick<AccountRow, 'id' | 'email' | 'password_hash'>;

const NO_PASSWORD =
  'This change needs a recent sign-in and this account has no password: sign in again, then retry.';

/** True when the session's sign-in happened within SENSITIVE_ACTION_WINDOW seconds of now. */
export function signedInRecently(deps: ConfigDeps, authTime: number | undefined): boolean {
  if (authTime === undefined) return false;
  return deps.clock.now().getTime() - authTime * 1000 <= deps.config.SENSITIVE_ACTION_WINDOW * 1000;
}

/**
 * Throws unless the request proves more than a bearer token: 401 INCORRECT_PASSWORD for a wrong
 * `password` (counted like a failed sign-in; 429 once the limit is reached), 403 REAUTHENTICATION_REQUIRED
 * without a password and without a recent sign-in. Call before changing anything.
 */
export async function assertReauthenticated(
  deps: ReauthDeps,
  account: ReauthSubject,
  proof: Reauthentication,
): Promise<void> {
  if (proof.password !== undefined) {
    // POST /auth/login's subject for this account: guesses here and there share one budget.
    const subject = account.email === null ? `user:${account.id}` : passwordSubject(account.email);
    const guess = await proof.guesses.begin(subject, proof.address);
    const stored = account.password_hash;
    let right: boolean;
    try {
      right = stored !== null && (await deps.passwords.verify(stored, proof.password));
    } catch (err) {
      await guess.abandon();
      throw err;
    }
    if (!right) throw new AppError('INCORRECT_PASSWORD');
    await guess.succeeded();
    return;
  }
  if (signedInRecently(deps, proof.authTime)) return;
  throw new AppError('REAUTHENTICATION_REQUIRED', account.password_hash === null ? NO_PASSWORD : undefined);
}
