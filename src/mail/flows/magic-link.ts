/**
 * Magic links (MAGIC_LINK_ENABLED). HBP emailed a 30-day refresh token and also set it as a cookie on
 * the POST /auth/login response, so knowing an address was enough to sign in as its owner. Here the link
 * carries a 'magic-link' ticket: random, stored hashed, single use, MAGIC_LINK_EXPIRES_IN minutes, and
 * delivered only by email; the session is opened when the link is followed.
 */
import { findAccountByEmail, findAccountById, loadProfile } from '../../auth/accounts-store.ts';
import { completeRegistration } from '../../auth/registration.ts';
import { issueSession } from '../../auth/sessions.ts';
import { consumeTicket, issueTicket } from '../../auth/tickets-store.ts';
import type { AppContext } from '../../context.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import type { LinkOutcome } from '../link-response.ts';
import { serviceLink } from '../links.ts';
import { accountLocale } from '../mail-store.ts';

export type MagicAction = 'register' | 'log-in';

export interface MagicLinkInput {
  accountId: string;
  email: string;
  displayName: string;
  action: MagicAction;
  redirectTo?: string;
  /** `register`: the registration attempt whose choices the link may apply (see auth/registration.ts). */
  attemptId?: string;
  /** Template locale; the account's when not given. */
  locale?: string;
  /** `register`: false when following the link will keep no choice made at registration. */
  keepsChoices?: boolean;
  /** Keep the account's earlier magic links valid (another registration attempt's link). */
  keepEarlier?: boolean;
}

/** Issues a 'magic-link' ticket and emails `GET /auth/magic-link?action=…&token=…` (header X-Token). */
export async function issueMagicLink(ctx: AppContext, tx: Queryable, input: MagicLinkInput): Promise<void> {
  const payload: Record<string, unknown> = { action: input.action };
  if (input.redirectTo) payload.redirect_to = input.redirectTo;
  if (input.attemptId) payload.attempt_id = input.attemptId;
  const { ticket: token } = await issueTicket(tx, ctx.config, ctx.clock.now(), {
    accountId: input.accountId,
    purpose: 'magic-link',
    payload,
    keepEarlier: input.keepEarlier,
  });
  const link = serviceLink(ctx.config, '/auth/magic-link', { action: input.action, token });
  await ctx.mailer.send({
    to: input.email,
    template: 'magic-link',
    locals: {
      display_name: input.displayName,
      email: input.email,
      url: ctx.config.SERVER_URL,
      token,
      link,
      // HBP's locals: `action` is shown in the text, `action_url` goes into the link.
      action: input.action === 'register' ? 'register' : 'log in',
      action_url: input.action,
      ...(input.action === 'register' ? { keeps_choices: input.keepsChoices ?? true } : {}),
      locale: input.locale ?? (await accountLocale(tx, input.accountId)),
    },
    headers: { 'X-Token': token },
  });
}

function requireEmails(ctx: AppContext): void {
  if (ctx.mailer.mode === 'disabled') throw new AppError('EMAILS_DISABLED');
}

/**
 * POST /auth/login without a password. The answer is always `{magicLink: true}`; the link goes out after
 * the response, and only to an existing, active account, so neither status nor timing tells whether the
 * address is registered.
 */
export function requestMagicLogin(ctx: AppContext, input: { email: string; redirectTo?: string }): void {
  requireEmails(ctx);
  ctx.mailer.later('magic-link-login', async () => {
    const account = await findAccountByEmail(ctx.db, input.email);
    if (!account?.active || !account.email) return;
    const email = account.email;
    await ctx.db.transaction(async (tx) => {
      const profile = await loadProfile(tx, account.id);
      await issueMagicLink(ctx, tx, {
        accountId: account.id,
        email,
        displayName: profile?.user.display_name ?? email,
        action: 'log-in',
        redirectTo: input.redirectTo,
      });
    });
  });
}

/**
 * GET /auth/magic-link: uses the token up and opens a session (activating the account for
 * `register`). A magic link stands for the password, not the second factor: an account with MFA gets an
 * 'mfa-login' ticket for POST /auth/mfa/totp instead. Undefined when the token is unknown, used,
 * expired, of another action, or its account cannot sign in.
 */
export async function followMagicLink(
  ctx: AppContext,
  input: { token: string; action: MagicAction },
): Promise<LinkOutcome | undefined> {
  const now = ctx.clock.now();
  return ctx.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, now, input.token, 'magic-link');
    if (!used || used.payload.action !== input.action) return undefined;
    const redirectTo = typeof used.payload.redirect_to === 'string' ? used.payload.redirect_to : undefined;
    if (input.action === 'register') {
      if (!(await completeRegistration(ctx, tx, used))) return undefined;
    }
    const account = await findAccountById(tx, used.accountId);
    if (!account?.active) return undefined;
    if (account.mfa_enabled) {
      const { ticket } = await issueTicket(tx, ctx.config, now, {
        accountId: account.id,
        purpose: 'mfa-login',
        keepEarlier: true,
      });
      return { kind: 'mfa', ticket, redirectTo };
    }
    return { kind: 'session', session: await issueSession(ctx, used.accountId, { db: tx }), redirectTo };
  });
}
