/**
 * Lost password (LOST_PASSWORD_ENABLED). The request always answers 204 at once: it records a deferred
 * step in the email outbox, the same write for every address, and the step (run after the response)
 * emails only an existing, active account (HBP answered 400 for unknown addresses).
 * The reset sets the password, uses up every open ticket of the account and ends every session.
 */

import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { appLink } from '../../mail/links.ts';
import type { DeferredInput } from '../../mail/port.ts';
import {
  accountLocale,
  findAccountByEmail,
  findAccountById,
  loadProfile,
  setPasswordHash,
} from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import { checkBreached } from '../passwords.ts';
import { endAllSessions } from '../sessions.ts';
import { consumeTicket, issueTicket, peekTicket, retireTickets } from '../tickets-store.ts';
import { handOverToMailbox, proveMailedAddress } from './link-emails.ts';

/** POST /auth/change-password/request: resolves once the request is durably recorded. */
export async function requestPasswordReset(
  deps: Pick<AuthDeps, 'db' | 'mailer'>,
  input: { email: string; redirectTo?: string },
): Promise<void> {
  await deps.mailer.sendLater(deps.db, 'password-reset', input);
}

/** The deferred step of a reset request: a ticket and its email, for an existing, active account only. */
export async function passwordResetStep(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  input: DeferredInput,
): Promise<void> {
  const account = await findAccountByEmail(tx, input.email);
  if (!account?.active || account.disabled || !account.email) return;
  await mailResetLink(deps, tx, { id: account.id, email: account.email }, input.redirectTo);
}

/**
 * Emails a new reset link to the account's address (its earlier reset links stop working): the
 * lost-password email, also sent by an operator (the admin API). Returns the link.
 */
export async function mailResetLink(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  account: { id: string; email: string },
  redirectTo?: string,
): Promise<{ link: string; expiresAt: Date }> {
  // The stored address, not the one typed (they differ at most in case; the stored one is the owner's).
  const email = account.email;
  const { ticket, link, expiresAt } = await issueResetLink(deps, tx, account.id, redirectTo, email);
  const profile = await loadProfile(tx, account.id);
  await deps.mailer.send(tx, {
    to: email,
    template: 'lost-password',
    locals: {
      display_name: profile?.user.display_name ?? email,
      email,
      url: deps.config.SERVER_URL,
      ticket,
      link,
      locale: await accountLocale(tx, account.id),
    },
    headers: { 'X-Ticket': ticket },
    expiresAt,
  });
  return { link, expiresAt };
}

/**
 * A new reset ticket for an account (earlier ones stop working) and the link that carries it: the
 * emailed link of the flow above (`sentTo`: the address it is mailed to, which following it proves), and
 * the one `gatehouse users reset-link` prints for support (handed over by a person: it proves nothing).
 */
export async function issueResetLink(
  deps: Pick<AuthDeps, 'config' | 'clock'>,
  tx: Queryable,
  accountId: string,
  redirectTo?: string,
  sentTo?: string,
): Promise<{ ticket: string; link: string; expiresAt: Date }> {
  const { ticket, expiresAt } = await issueTicket(tx, deps.config, deps.clock.now(), {
    accountId,
    purpose: 'password-reset',
    payload: sentTo ? { sent_to: sentTo } : {},
  });
  return { ticket, expiresAt, link: appLink(deps.config, redirectTo, { ticket, type: 'password-reset' }) };
}

/** POST /auth/change-password/change. */
export async function resetPassword(
  deps: AuthDeps,
  input: { ticket: string; newPassword: string; client?: EventClient },
): Promise<void> {
  const now = deps.clock.now();
  // Checked before hashing, so a made-up ticket costs no argon2 work; used up below, atomically.
  if (!(await peekTicket(deps.db, now, input.ticket, 'password-reset'))) throw new AppError('INVALID_TICKET');
  await checkBreached(deps.config, input.newPassword);
  const hash = await deps.passwords.hash(input.newPassword);
  await deps.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, now, input.ticket, 'password-reset');
    if (!used) throw new AppError('INVALID_TICKET');
    const account = await findAccountById(tx, used.accountId);
    if (!account?.active) throw new AppError('INVALID_TICKET');
    await setPasswordHash(tx, account.id, hash);
    const client = input.client ?? null;
    if (await proveMailedAddress(deps, tx, used, 'password-reset'))
      await handOverToMailbox(deps, tx, account.id, 'password-reset', input.client);
    await retireTickets(tx, now, account.id);
    await recordEvent(deps, tx, { type: 'password_reset', accountId: account.id, client, details: {} });
    await endAllSessions(deps, account.id, undefined, tx, { reason: 'password_reset', client });
  });
}
