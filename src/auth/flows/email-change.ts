/**
 * Email change, direct (VERIFY_EMAILS=false) or verified (a ticket emailed to the new address, then the
 * switch). Both are sensitive changes (auth/reauth.ts): moving the email and then resetting the password
 * there is how a stolen access token would buy the account. So they need a recent sign-in or the current
 * password, they end the account's other sessions, and the old address is told (NOTIFY_EMAIL_CHANGE).
 *
 * An address that another account uses (or has asked for) is answered exactly like a free one, with one
 * email as well: the mailbox of that address is told that it is in use (`email-in-use`), so the caller
 * learns nothing from the status or the time taken; nothing of the caller's is moved to it.
 *
 * Every step queues its email in the outbox in its own transaction: the email goes out after the commit
 * (the ticket it carries is already valid), and a step that rolls back sends nothing.
 */

import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { appHome, appLink } from '../../mail/links.ts';
import { assertEmailDomain, callerAccount } from '../accounts.ts';
import {
  type AccountRow,
  accountLocale,
  emailTaken,
  findAccountByEmail,
  findAccountById,
  loadProfile,
  releaseStalePendingEmail,
  setEmail,
  setPendingEmail,
} from '../accounts-store.ts';
import type { MailingDeps } from '../deps.ts';
import { assertReauthenticated, type Reauthentication } from '../reauth.ts';
import { endAllSessions, endedBy, type OwnSignIn, ownFamily } from '../sessions.ts';
import { consumeTicket, issueTicket, retireTickets } from '../tickets-store.ts';

const sameAddress = (a: string | null, b: string) => a !== null && a.toLowerCase() === b.toLowerCase();

/** Whether email-change notices go out (NOTIFY_EMAIL_CHANGE, and a mailer that sends). */
const noticesOn = (deps: MailingDeps) => deps.config.NOTIFY_EMAIL_CHANGE && deps.mailer.sends;

/** Tells the old address that the account's email is now `newEmail`. */
async function notifyOldAddress(
  deps: MailingDeps,
  tx: Queryable,
  account: AccountRow,
  oldEmail: string,
  newEmail: string,
): Promise<void> {
  const profile = await loadProfile(tx, account.id);
  await deps.mailer.send(tx, {
    to: oldEmail,
    template: 'notify-email-change',
    locals: {
      display_name: profile?.user.display_name ?? oldEmail,
      email: oldEmail,
      url: deps.config.SERVER_URL,
      link: appHome(deps.config), // the application, never a link that carries a secret
      new_email: newEmail,
      locale: await accountLocale(tx, account.id),
    },
  });
}

/**
 * Tells the mailbox of `address`, which another account uses or has asked for, that someone tried to
 * move an account to it and nothing changed. It stands in for the email a free address would have
 * caused, so both answers cost the same and fail the same way.
 */
async function tellAddressInUse(deps: MailingDeps, tx: Queryable, address: string): Promise<void> {
  const owner = await findAccountByEmail(tx, address);
  const profile = owner ? await loadProfile(tx, owner.id) : undefined;
  await deps.mailer.send(tx, {
    to: address,
    template: 'email-in-use',
    locals: {
      display_name: profile?.user.display_name ?? address,
      email: address,
      url: deps.config.SERVER_URL,
      link: appHome(deps.config), // the application, never a link that carries a secret
      locale: owner ? await accountLocale(tx, owner.id) : undefined,
    },
  });
}

/**
 * POST /auth/change-email (VERIFY_EMAILS=false) for the signed-in `userId`: the email changes at once,
 * the account's other sessions end (the caller's own sign-in, `own`, is kept), links mailed to the old
 * address stop working and the old address is told.
 */
export async function changeEmailDirectly(
  deps: MailingDeps,
  userId: string,
  input: { newEmail: string; own?: OwnSignIn; reauth: Reauthentication },
): Promise<void> {
  assertEmailDomain(deps, input.newEmail, 'new_email');
  const account = await callerAccount(deps, userId);
  await assertReauthenticated(deps, account, input.reauth);
  const now = deps.clock.now();
  const oldEmail = account.email;
  await deps.db.transaction(async (tx) => {
    if (sameAddress(oldEmail, input.newEmail)) {
      // The caller's own address (perhaps in another case): nothing moves, nobody needs telling.
      await setEmail(tx, account.id, input.newEmail);
      return;
    }
    await releaseStalePendingEmail(tx, input.newEmail, now);
    if (await emailTaken(tx, input.newEmail, account.id)) {
      if (noticesOn(deps) && oldEmail) await tellAddressInUse(deps, tx, input.newEmail);
      return;
    }
    const keep = input.own === undefined ? undefined : await ownFamily(deps, account.id, input.own, tx);
    // Not confirmed from the new mailbox: the address is not proven (provider sign-in will not link it).
    await setEmail(tx, account.id, input.newEmail);
    // Links already mailed to the old address (a reset, a magic link) must not outlive the change.
    await retireTickets(tx, now, account.id);
    await recordEvent(deps, tx, {
      type: 'email_changed',
      accountId: account.id,
      sessionId: keep ?? null,
      client: input.own?.client ?? null,
      details: { confirmed: false },
    });
    await endAllSessions(deps, account.id, keep, tx, endedBy('email_changed', input.own));
    if (noticesOn(deps) && oldEmail) await notifyOldAddress(deps, tx, account, oldEmail, input.newEmail);
  });
}

/**
 * POST /auth/change-email/request for the signed-in `userId`: a ticket to the new address. The sign-in
 * that asked (`own`) is recorded with the ticket and is the one kept when the change is confirmed.
 */
export async function requestEmailChange(
  deps: MailingDeps,
  userId: string,
  input: { newEmail: string; redirectTo?: string; own?: OwnSignIn; reauth: Reauthentication },
): Promise<void> {
  assertEmailDomain(deps, input.newEmail, 'new_email');
  const account = await callerAccount(deps, userId);
  await assertReauthenticated(deps, account, input.reauth);
  const now = deps.clock.now();
  await releaseStalePendingEmail(deps.db, input.newEmail, now);
  // The caller's own address: there is nothing to hide from them.
  if (sameAddress(account.email, input.newEmail)) throw new AppError('EMAIL_NOT_ALLOWED');
  await deps.db.transaction(async (tx) => {
    if (await emailTaken(tx, input.newEmail, account.id)) {
      // As a new request would, this one replaces the caller's earlier request (else whether an earlier
      // ticket still works would tell a free address from a taken one); no ticket names the address.
      await retireTickets(tx, now, account.id, 'email-change');
      await setPendingEmail(tx, account.id, null);
      await tellAddressInUse(deps, tx, input.newEmail);
      return;
    }
    const keepFamily = input.own === undefined ? undefined : await ownFamily(deps, account.id, input.own, tx);
    await setPendingEmail(tx, account.id, input.newEmail);
    // Issuing retires the account's earlier email-change tickets: only the latest request can complete.
    const { ticket, expiresAt } = await issueTicket(tx, deps.config, now, {
      accountId: account.id,
      purpose: 'email-change',
      payload: { new_email: input.newEmail, ...(keepFamily ? { keep_family: keepFamily } : {}) },
    });
    const profile = await loadProfile(tx, account.id);
    const link = appLink(deps.config, input.redirectTo, { ticket, type: 'email-change' });
    await deps.mailer.send(tx, {
      to: input.newEmail,
      template: 'change-email',
      locals: {
        display_name: profile?.user.display_name ?? account.email ?? input.newEmail,
        email: input.newEmail,
        url: deps.config.SERVER_URL,
        ticket,
        link,
        new_email: input.newEmail,
        locale: await accountLocale(tx, account.id),
      },
      headers: { 'X-Ticket': ticket },
      expiresAt,
    });
  });
}

/**
 * POST /auth/change-email/change: switches to the address the ticket was issued for. Only an
 * 'email-change' ticket works (HBP took any ticket and could set the address to NULL); an address taken
 * meanwhile is refused with 400 and the ticket stays unused. Every session of the account but the one
 * that asked for the change ends, and NOTIFY_EMAIL_CHANGE tells the old address.
 */
export async function confirmEmailChange(
  deps: MailingDeps,
  ticket: string,
  client?: EventClient,
): Promise<void> {
  const now = deps.clock.now();
  await deps.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, now, ticket, 'email-change');
    const newEmail = used?.payload.new_email;
    if (!used || typeof newEmail !== 'string') throw new AppError('INVALID_TICKET');
    const account = await findAccountById(tx, used.accountId);
    if (!account) throw new AppError('INVALID_TICKET');
    await releaseStalePendingEmail(tx, newEmail, now);
    if (await emailTaken(tx, newEmail, account.id)) throw new AppError('EMAIL_NOT_ALLOWED');
    // The ticket was mailed to the new address: following it proves that mailbox.
    await setEmail(tx, account.id, newEmail, { by: 'email-change', at: now });
    // Links already mailed to the old address (a reset, a magic link) must not outlive the change.
    await retireTickets(tx, now, account.id);
    const keep = typeof used.payload.keep_family === 'string' ? used.payload.keep_family : undefined;
    // The session kept is the one that asked; the client is the one that followed the link.
    const by = { reason: 'email_changed', sessionId: keep ?? null, client: client ?? null } as const;
    await recordEvent(deps, tx, {
      type: 'email_changed',
      accountId: account.id,
      sessionId: by.sessionId,
      client: by.client,
      details: { confirmed: true },
    });
    await endAllSessions(deps, account.id, keep, tx, by);
    const oldEmail = account.email;
    if (noticesOn(deps) && oldEmail) await notifyOldAddress(deps, tx, account, oldEmail, newEmail);
  });
}
