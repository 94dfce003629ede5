/**
 * Registration emails: activation links, and the notice to an address that already has an account.
 * Each is issued inside the caller's transaction and sent before it commits: if the SMTP server refuses,
 * the error (503) rolls back the account, attempt or ticket with it, so nobody is left with an account
 * they cannot activate or a ticket they never received.
 */
import { findAccountByEmail, loadProfile, lockAccountByEmail } from '../../auth/accounts-store.ts';
import { resendRegistration } from '../../auth/registration.ts';
import { issueTicket } from '../../auth/tickets-store.ts';
import type { AppContext } from '../../context.ts';
import type { Queryable } from '../../db/database.ts';
import { serviceLink } from '../links.ts';
import { accountLocale } from '../mail-store.ts';

export interface ActivationInput {
  accountId: string;
  email: string;
  displayName: string;
  /** Where GET /auth/activate sends the browser (already checked against ALLOWED_REDIRECT_URLS). */
  redirectTo?: string;
  /** The registration attempt whose choices the link may apply (see auth/registration.ts). */
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
 */
export async function issueActivation(ctx: AppContext, tx: Queryable, input: ActivationInput): Promise<void> {
  if (ctx.mailer.mode === 'disabled') return;
  const payload: Record<string, unknown> = {};
  if (input.redirectTo) payload.redirect_to = input.redirectTo;
  if (input.attemptId) payload.attempt_id = input.attemptId;
  const { ticket } = await issueTicket(tx, ctx.config, ctx.clock.now(), {
    accountId: input.accountId,
    purpose: 'activation',
    payload,
    keepEarlier: input.keepEarlier,
  });
  const link = serviceLink(ctx.config, '/auth/activate', { ticket });
  await ctx.mailer.send({
    to: input.email,
    template: 'activate-account',
    locals: {
      display_name: input.displayName,
      email: input.email,
      url: ctx.config.SERVER_URL,
      ticket,
      link,
      keeps_choices: input.keepsChoices ?? true,
      locale: input.locale ?? (await accountLocale(tx, input.accountId)),
    },
    headers: { 'X-Ticket': ticket },
  });
}

/**
 * Tells an address that already has an active account that someone (perhaps its owner) tried to register
 * it again, with a way in: the app's sign-in page (`redirect_to`, else REDIRECT_URL_SUCCESS, else
 * SERVER_URL). Nothing on the account changes. No ticket: a reset is asked for the usual way.
 */
export async function sendAccountExists(
  ctx: AppContext,
  tx: Queryable,
  input: { id: string; email: string; locale?: string; redirectTo?: string },
): Promise<void> {
  const c = ctx.config;
  const profile = await loadProfile(tx, input.id);
  await ctx.mailer.send({
    to: input.email,
    template: 'account-exists',
    locals: {
      display_name: profile?.user.display_name ?? input.email,
      email: input.email,
      url: c.SERVER_URL,
      link: input.redirectTo ?? (c.REDIRECT_URL_SUCCESS || c.SERVER_URL),
      lost_password: c.LOST_PASSWORD_ENABLED,
      locale: (await accountLocale(tx, input.id)) ?? input.locale,
    },
  });
}

/**
 * POST /auth/activate/resend: a new link for an account that is still waiting for activation (an
 * activation link, or a magic register link after a password-less registration). Runs after the
 * response, so the answer is the same, in status and in time, whether or not the address has such an
 * account.
 */
export function resendActivation(ctx: AppContext, input: { email: string; redirectTo?: string }): void {
  ctx.mailer.later('activation-resend', async () => {
    const found = await findAccountByEmail(ctx.db, input.email);
    if (!found || found.active || found.is_anonymous || !found.email) return;
    await ctx.db.transaction(async (tx) => {
      // Read again under lock: an activation or a registration of the same account waits for this one.
      const account = await lockAccountByEmail(tx, input.email);
      if (!account || account.active || account.email === null) return;
      await resendRegistration(ctx, tx, { ...account, email: account.email }, input.redirectTo);
    });
  });
}
