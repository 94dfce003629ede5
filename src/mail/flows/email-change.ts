/**
 * Verified email change (VERIFY_EMAILS): a ticket emailed to the new address, then the switch.
 * Both steps send their email before committing, so a refused message (503) leaves no pending change,
 * no live ticket and no switched address behind.
 */
import { assertEmailDomain, callerAccount } from '../../auth/accounts.ts';
import { emailTaken, findAccountById, loadProfile, setEmail } from '../../auth/accounts-store.ts';
import { consumeTicket, issueTicket, retireTickets } from '../../auth/tickets-store.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { appLink } from '../links.ts';
import { accountLocale, releaseStalePendingEmail, setPendingEmail } from '../mail-store.ts';

const sameAddress = (a: string | null, b: string) => a !== null && a.toLowerCase() === b.toLowerCase();

/** POST /auth/change-email/request for the signed-in `userId`. */
export async function requestEmailChange(
  ctx: AppContext,
  userId: string,
  input: { newEmail: string; redirectTo?: string },
): Promise<void> {
  assertEmailDomain(ctx, input.newEmail, 'new_email');
  const account = await callerAccount(ctx, userId);
  const now = ctx.clock.now();
  await releaseStalePendingEmail(ctx.db, input.newEmail, now);
  if (sameAddress(account.email, input.newEmail) || (await emailTaken(ctx.db, input.newEmail, account.id))) {
    throw new AppError('EMAIL_NOT_ALLOWED');
  }
  await ctx.db.transaction(async (tx) => {
    await setPendingEmail(tx, account.id, input.newEmail);
    // Issuing retires the account's earlier email-change tickets: only the latest request can complete.
    const { ticket } = await issueTicket(tx, ctx.config, now, {
      accountId: account.id,
      purpose: 'email-change',
      payload: { new_email: input.newEmail },
    });
    const profile = await loadProfile(tx, account.id);
    const link = appLink(ctx.config, input.redirectTo, { ticket, type: 'email-change' });
    await ctx.mailer.send({
      to: input.newEmail,
      template: 'change-email',
      locals: {
        display_name: profile?.user.display_name ?? account.email ?? input.newEmail,
        email: input.newEmail,
        url: ctx.config.SERVER_URL,
        ticket,
        link,
        new_email: input.newEmail,
        locale: await accountLocale(tx, account.id),
      },
      headers: { 'X-Ticket': ticket },
    });
  });
}

/**
 * POST /auth/change-email/change: switches to the address the ticket was issued for. Only an
 * 'email-change' ticket works (HBP took any ticket and could set the address to NULL); an address taken
 * meanwhile is refused with 400 and the ticket stays unused. NOTIFY_EMAIL_CHANGE tells the old address.
 */
export async function confirmEmailChange(ctx: AppContext, ticket: string): Promise<void> {
  const now = ctx.clock.now();
  await ctx.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, now, ticket, 'email-change');
    const newEmail = used?.payload.new_email;
    if (!used || typeof newEmail !== 'string') throw new AppError('INVALID_TICKET');
    const account = await findAccountById(tx, used.accountId);
    if (!account) throw new AppError('INVALID_TICKET');
    await releaseStalePendingEmail(tx, newEmail, now);
    if (await emailTaken(tx, newEmail, account.id)) throw new AppError('EMAIL_NOT_ALLOWED');
    await setEmail(tx, account.id, newEmail);
    // Links already mailed to the old address (a reset, a magic link) must not outlive the change.
    await retireTickets(tx, now, account.id);
    const oldEmail = account.email;
    if (ctx.config.NOTIFY_EMAIL_CHANGE && oldEmail && ctx.mailer.mode !== 'disabled') {
      const profile = await loadProfile(tx, account.id);
      await ctx.mailer.send({
        to: oldEmail,
        template: 'notify-email-change',
        locals: {
          display_name: profile?.user.display_name ?? oldEmail,
          email: oldEmail,
          url: ctx.config.SERVER_URL,
          link: ctx.config.REDIRECT_URL_SUCCESS || ctx.config.SERVER_URL,
          new_email: newEmail,
          locale: await accountLocale(tx, account.id),
        },
      });
    }
  });
}
