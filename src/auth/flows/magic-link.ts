/**
 * Magic links (MAGIC_LINK_ENABLED). HBP emailed a 30-day refresh token and also set it as a cookie on
 * the POST /auth/login response, so knowing an address was enough to sign in as its owner. Here the link
 * carries a 'magic-link' ticket: random, stored hashed, single use, MAGIC_LINK_EXPIRES_IN minutes, and
 * delivered only by email; the session is opened when the link is followed.
 */

import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import type { EventClient } from '../../events/types.ts';
import type { DeferredInput } from '../../mail/port.ts';
import { findAccountByEmail, findAccountById, loadProfile } from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import { issueSession, type Session } from '../sessions.ts';
import { consumeTicket, issueTicket } from '../tickets-store.ts';
import { handOverToMailbox, issueMagicLink, type MagicAction, proveMailedAddress } from './link-emails.ts';
import { completeRegistration } from './registration.ts';

/** What following an emailed link (activation, magic link) leads to: a session, or the MFA step. */
export type LinkOutcome =
  | { kind: 'session'; session: Session; redirectTo?: string }
  | { kind: 'mfa'; ticket: string; redirectTo?: string };

function requireEmails(deps: AuthDeps): void {
  if (!deps.mailer.sends) throw new AppError('EMAILS_DISABLED');
}

/**
 * POST /auth/login without a password. The answer is always `{magicLink: true}`: the request is recorded
 * as a deferred step of the email outbox (the same write for every address), and the step, run after the
 * response, emails only an existing, active account, so neither status nor timing tells whether the
 * address is registered.
 */
export async function requestMagicLogin(
  deps: AuthDeps,
  input: { email: string; redirectTo?: string },
): Promise<void> {
  requireEmails(deps);
  await deps.mailer.sendLater(deps.db, 'magic-link-login', input);
}

/** The deferred step of a magic-link login: a 'log-in' link for an existing, active account only. */
export async function magicLoginStep(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  input: DeferredInput,
): Promise<void> {
  const account = await findAccountByEmail(tx, input.email);
  if (!account?.active || account.disabled || !account.email) return;
  const email = account.email;
  const profile = await loadProfile(tx, account.id);
  await issueMagicLink(deps, tx, {
    accountId: account.id,
    email,
    displayName: profile?.user.display_name ?? email,
    action: 'log-in',
    redirectTo: input.redirectTo,
  });
}

/**
 * GET /auth/magic-link: uses the token up and opens a session (activating the account for
 * `register`). A magic link stands for the password, not the second factor: an account with MFA gets an
 * 'mfa-login' ticket for POST /auth/mfa/totp instead. Undefined when the token is unknown, used,
 * expired, of another action, or its account cannot sign in.
 */
export async function followMagicLink(
  deps: AuthDeps,
  input: { token: string; action: MagicAction; client?: EventClient },
): Promise<LinkOutcome | undefined> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, now, input.token, 'magic-link');
    if (!used || used.payload.action !== input.action) return undefined;
    const redirectTo = typeof used.payload.redirect_to === 'string' ? used.payload.redirect_to : undefined;
    if (input.action === 'register') {
      if (!(await completeRegistration(deps, tx, used, 'magic-link'))) return undefined;
    }
    const account = await findAccountById(tx, used.accountId);
    if (!account?.active) return undefined;
    if (input.action === 'log-in' && (await proveMailedAddress(deps, tx, used, 'magic-link')))
      await handOverToMailbox(deps, tx, account.id, 'magic-link', input.client);
    if (account.mfa_enabled) {
      const { ticket } = await issueTicket(tx, deps.config, now, {
        accountId: account.id,
        purpose: 'mfa-login',
        keepEarlier: true,
      });
      return { kind: 'mfa', ticket, redirectTo };
    }
    return {
      kind: 'session',
      session: await issueSession(deps, used.accountId, {
        db: tx,
        method: 'magic-link',
        client: input.client,
      }),
      redirectTo,
    };
  });
}
