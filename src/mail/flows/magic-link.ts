/**
 * Magic links (MAGIC_LINK_ENABLED). HBP emailed a 30-day refresh token and also set it as a cookie on
 * the POST /auth/login response, so knowing an address was enough to sign in as its owner. Here the link
 * carries a 'magic-link' ticket: random, stored hashed, single use, MAGIC_LINK_EXPIRES_IN minutes, and
 * delivered only by email; the session is opened when the link is followed.
 */
import { pendingUser, planNewAccount, type RegisterInput } from '../../auth/accounts.ts';
import {
  activateAccount,
  findAccountByEmail,
  findAccountById,
  insertAccount,
  loadProfile,
} from '../../auth/accounts-store.ts';
import type { PublicUser } from '../../auth/schemas.ts';
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
}

/** Issues a 'magic-link' ticket and emails `GET /auth/magic-link?action=…&token=…` (header X-Token). */
export async function issueMagicLink(ctx: AppContext, tx: Queryable, input: MagicLinkInput): Promise<void> {
  const payload: Record<string, unknown> = { action: input.action };
  if (input.redirectTo) payload.redirect_to = input.redirectTo;
  const { ticket: token } = await issueTicket(tx, ctx.config, ctx.clock.now(), {
    accountId: input.accountId,
    purpose: 'magic-link',
    payload,
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
      locale: await accountLocale(tx, input.accountId),
    },
    headers: { 'X-Token': token },
  });
}

function requireEmails(ctx: AppContext): void {
  if (ctx.mailer.mode === 'disabled') throw new AppError('EMAILS_DISABLED');
}

/**
 * Password-less registration: an inactive account without a password, activated when its link is
 * followed. No tokens are returned, even with AUTO_ACTIVATE_NEW_USERS: the address is not proven yet.
 * The email is sent before the account is committed (503 and no account when SMTP fails).
 */
export async function registerWithMagicLink(
  ctx: AppContext,
  input: Omit<RegisterInput, 'password'> & { redirectTo?: string },
): Promise<{ user: PublicUser }> {
  requireEmails(ctx);
  const { defaultRole, roles, userData } = await planNewAccount(ctx, input);
  return ctx.db.transaction(async (tx) => {
    const { accountId } = await insertAccount(tx, {
      email: input.email,
      passwordHash: null,
      active: false,
      isAnonymous: false,
      defaultRole,
      roles,
      userData,
    });
    const user = await pendingUser(tx, accountId, input.locale);
    await issueMagicLink(ctx, tx, {
      accountId,
      email: input.email,
      displayName: user.display_name ?? input.email,
      action: 'register',
      redirectTo: input.redirectTo,
    });
    return { user };
  });
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
      if (!(await activateAccount(tx, used.accountId))) return undefined;
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
