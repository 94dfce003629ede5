/**
 * Activation emails. Each is issued inside the caller's transaction and sent before it commits: if the
 * SMTP server refuses, the error (503) rolls back the account or ticket with it, so nobody is left with
 * an account they cannot activate or a ticket they never received.
 */
import { findAccountByEmail, loadProfile } from '../../auth/accounts-store.ts';
import { issueTicket } from '../../auth/tickets-store.ts';
import type { AppContext } from '../../context.ts';
import type { Queryable } from '../../db/database.ts';
import { serviceLink } from '../links.ts';
import { accountLocale } from '../mail-store.ts';
import { issueMagicLink } from './magic-link.ts';

export interface ActivationInput {
  accountId: string;
  email: string;
  displayName: string;
  /** Where GET /auth/activate sends the browser (already checked against ALLOWED_REDIRECT_URLS). */
  redirectTo?: string;
}

/**
 * Issues an 'activation' ticket and emails the link `GET /auth/activate?ticket=…` (header X-Ticket).
 * With EMAILS_ENABLED=false nothing is issued: the account waits for an operator to activate it.
 */
export async function issueActivation(ctx: AppContext, tx: Queryable, input: ActivationInput): Promise<void> {
  if (ctx.mailer.mode === 'disabled') return;
  const { ticket } = await issueTicket(tx, ctx.config, ctx.clock.now(), {
    accountId: input.accountId,
    purpose: 'activation',
    payload: input.redirectTo ? { redirect_to: input.redirectTo } : {},
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
      locale: await accountLocale(tx, input.accountId),
    },
    headers: { 'X-Ticket': ticket },
  });
}

/**
 * POST /auth/activate/resend: a new link for an account that is still waiting for activation (an
 * activation link, or a magic register link when it has no password). Runs after the response, so the
 * answer is the same, in status and in time, whether or not the address has such an account.
 */
export function resendActivation(ctx: AppContext, input: { email: string; redirectTo?: string }): void {
  ctx.mailer.later('activation-resend', async () => {
    const account = await findAccountByEmail(ctx.db, input.email);
    if (!account || account.active || account.is_anonymous || !account.email) return;
    const email = account.email;
    await ctx.db.transaction(async (tx) => {
      const profile = await loadProfile(tx, account.id);
      const displayName = profile?.user.display_name ?? email;
      const common = { accountId: account.id, email, displayName, redirectTo: input.redirectTo };
      if (account.password_hash === null && ctx.config.MAGIC_LINK_ENABLED) {
        await issueMagicLink(ctx, tx, { ...common, action: 'register' });
      } else {
        await issueActivation(ctx, tx, common);
      }
    });
  });
}
