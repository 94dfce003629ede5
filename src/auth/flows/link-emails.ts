/**
 * The emails that carry a sign-in or registration link (activation, magic link) and the notice to an
 * address that already has an account. Each is issued inside the caller's transaction and handed to the
 * MailPort with it: the outbox writes it in that transaction and delivers it after the commit, so the
 * link's ticket is always committed before the email can arrive, and a rollback sends nothing.
 */

import type { Queryable } from '../../db/database.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { appHome, serviceLink } from '../../mail/links.ts';
import {
  accountLocale,
  clearPasswordHash,
  loadProfile,
  markEmailProven,
  type ProofMethod,
} from '../accounts-store.ts';
import type { AuthDeps, SessionDeps } from '../deps.ts';
import { deleteAccountLinks } from '../oauth/links-store.ts';
import { deleteAccountPasskeys } from '../passkeys/passkeys-store.ts';
import { endAllSessions } from '../sessions.ts';
import { type ConsumedTicket, issueTicket } from '../tickets-store.ts';

/**
 * Following a link proves the mailbox it was mailed to: every emailed ticket names its address
 * (`sent_to`), and the account's address is recorded as proven when it is still that one. A ticket
 * without it (a reset link printed for support, a link from before proofs were recorded) proves nothing.
 * True when this is the address's first proof.
 */
export async function proveMailedAddress(
  deps: Pick<AuthDeps, 'clock'>,
  tx: Queryable,
  used: ConsumedTicket,
  by: ProofMethod,
): Promise<boolean> {
  const to = used.payload.sent_to;
  if (typeof to !== 'string') return false;
  const { first } = await markEmailProven(tx, used.accountId, to, { by, at: deps.clock.now() });
  return first;
}

/**
 * The first proof of an active account's address, by a link that lets its follower in without the
 * password (magic link, password reset), hands the account to the mailbox's owner, and only to them.
 * Until then the account was whoever typed the address in (a registration with auto-activation, a
 * direct email change): they may hold its password, sessions and provider links, and would keep their
 * way into what the real owner does next. So the ways in that do not come from the mailbox end here:
 * every session, every provider link, every passkey and, for a magic link, the password (a reset replaces it anyway).
 * The second factor stays: alone it lets nobody in, and removing it would let a mailbox alone undo it on
 * the accounts moved from HBP, whose addresses carry no proof.
 */
export async function handOverToMailbox(
  deps: SessionDeps,
  tx: Queryable,
  accountId: string,
  by: 'magic-link' | 'password-reset' | 'email-otp',
  client?: EventClient,
): Promise<void> {
  // The owner's feed says what went (providers unlinked, sessions ended), from the link's follower.
  for (const provider of await deleteAccountLinks(tx, accountId))
    await recordEvent(deps, tx, {
      type: 'provider_unlinked',
      accountId,
      client: client ?? null,
      details: { provider },
    });
  await deleteAccountPasskeys(tx, accountId);
  // An emailed code lets its typist in without the password, as a magic link does; a reset replaces it.
  if (by !== 'password-reset') await clearPasswordHash(tx, accountId);
  // A reset ends every session anyway: the feed gives that as the reason.
  const reason = by === 'password-reset' ? 'password_reset' : 'address_proven';
  await endAllSessions(deps, accountId, undefined, tx, { reason, client: client ?? null });
}

export interface ActivationInput {
  accountId: string;
  email: string;
  displayName: string;
  /** Where GET /auth/activate sends the browser (already checked against ALLOWED_REDIRECT_URLS). */
  redirectTo?: string;
  /** The registration attempt whose choices the link may apply (see auth/flows/registration.ts). */
  attemptId?: string;
  /** Template locale; the account's when not given. */
  locale?: string;
  /** False when following this link will keep no password or choice (the email says so). */
  keepsChoices?: boolean;
  /** Keep the account's earlier activation links valid (another attempt's link). */
  keepEarlier?: boolean;
}

/**
 * Issues an 'activation' ticket and emails the link `GET /auth/activate?ticket=…` (header X-Ticket).
 * With EMAILS_ENABLED=false nothing is issued: the account waits for an operator to activate it.
 * Returns the link emailed, if any.
 */
export async function issueActivation(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  input: ActivationInput,
): Promise<{ link: string; expiresAt: Date } | undefined> {
  if (!deps.mailer.sends) return undefined;
  const payload: Record<string, unknown> = { sent_to: input.email };
  if (input.redirectTo) payload.redirect_to = input.redirectTo;
  if (input.attemptId) payload.attempt_id = input.attemptId;
  const { ticket, expiresAt } = await issueTicket(tx, deps.config, deps.clock.now(), {
    accountId: input.accountId,
    purpose: 'activation',
    payload,
    keepEarlier: input.keepEarlier,
  });
  const link = serviceLink(deps.config, '/auth/activate', { ticket });
  await deps.mailer.send(tx, {
    to: input.email,
    template: 'activate-account',
    locals: {
      display_name: input.displayName,
      email: input.email,
      url: deps.config.SERVER_URL,
      ticket,
      link,
      keeps_choices: input.keepsChoices ?? true,
      locale: input.locale ?? (await accountLocale(tx, input.accountId)),
    },
    headers: { 'X-Ticket': ticket },
    expiresAt,
  });
  return { link, expiresAt };
}

/**
 * Tells an address that already has an active account that someone (perhaps its owner) tried to register
 * it again, with a way in: the app's sign-in page (`redirect_to`, else mail/links.ts appHome). Nothing on the account changes. No ticket: a reset is asked for the usual way.
 */
export async function sendAccountExists(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  input: { id: string; email: string; locale?: string; redirectTo?: string },
): Promise<void> {
  const c = deps.config;
  const profile = await loadProfile(tx, input.id);
  await deps.mailer.send(tx, {
    to: input.email,
    template: 'account-exists',
    locals: {
      display_name: profile?.user.display_name ?? input.email,
      email: input.email,
      url: c.SERVER_URL,
      link: input.redirectTo ?? appHome(c),
      lost_password: c.LOST_PASSWORD_ENABLED,
      locale: (await accountLocale(tx, input.id)) ?? input.locale,
    },
  });
}

export type MagicAction = 'register' | 'log-in';

export interface MagicLinkInput {
  accountId: string;
  email: string;
  displayName: string;
  action: MagicAction;
  redirectTo?: string;
  /** `register`: the registration attempt whose choices the link may apply (see auth/flows/registration.ts). */
  attemptId?: string;
  /** Template locale; the account's when not given. */
  locale?: string;
  /** `register`: false when following the link will keep no choice made at registration. */
  keepsChoices?: boolean;
  /** Keep the account's earlier magic links valid (another registration attempt's link). */
  keepEarlier?: boolean;
}

/**
 * Issues a 'magic-link' ticket and emails `GET /auth/magic-link?action=…&token=…` (header X-Token);
 * returns the link emailed.
 */
export async function issueMagicLink(
  deps: Pick<AuthDeps, 'config' | 'clock' | 'mailer'>,
  tx: Queryable,
  input: MagicLinkInput,
): Promise<{ link: string; expiresAt: Date }> {
  const payload: Record<string, unknown> = { action: input.action, sent_to: input.email };
  if (input.redirectTo) payload.redirect_to = input.redirectTo;
  if (input.attemptId) payload.attempt_id = input.attemptId;
  const { ticket: token, expiresAt } = await issueTicket(tx, deps.config, deps.clock.now(), {
    accountId: input.accountId,
    purpose: 'magic-link',
    payload,
    keepEarlier: input.keepEarlier,
  });
  const link = serviceLink(deps.config, '/auth/magic-link', { action: input.action, token });
  await deps.mailer.send(tx, {
    to: input.email,
    template: 'magic-link',
    locals: {
      display_name: input.displayName,
      email: input.email,
      url: deps.config.SERVER_URL,
      token,
      link,
      // HBP's locals: `action` is shown in the text, `action_url` goes into the link.
      action: input.action === 'register' ? 'register' : 'log in',
      action_url: input.action,
      ...(input.action === 'register' ? { keeps_choices: input.keepsChoices ?? true } : {}),
      locale: input.locale ?? (await accountLocale(tx, input.accountId)),
    },
    headers: { 'X-Token': token },
    expiresAt,
  });
  return { link, expiresAt };
}
