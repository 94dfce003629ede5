/**
 * Email one-time codes (EMAIL_OTP_ENABLED): a 6-digit code typed from an email, for apps that cannot
 * open a link (mobile). `POST /auth/otp/email` always answers 204 and records a deferred step of the
 * outbox, so neither status nor time tells whether the address has an account; the step, run after the
 * answer, mails a code to an active account, or (with `create_user`) a sign-up code to a new or pending
 * address. `POST /auth/otp/email/verify` trades the code for the answer of POST /auth/login.
 *
 * A code lives 10 minutes, is stored only as a salted hash (tickets of purpose 'email-otp'), compared in
 * constant time, dies after 5 wrong tries, is used up by exactly one of racing verifications (one
 * UPDATE … WHERE unused) and is retired by the next code of the account. A code proves the mailbox it was
 * sent to, as an emailed link does: a pending registration it completes keeps no password or choice that
 * an unproven request made (registration.ts, completeRegistration).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { secretsEqual } from '../../constant-time.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import type { EventClient } from '../../events/types.ts';
import { appHome, serviceLink } from '../../mail/links.ts';
import type { DeferredInput } from '../../mail/port.ts';
import { userCreated } from '../../webhooks/webhooks.ts';
import { emailDomainAllowed } from '../accounts.ts';
import {
  type AccountRow,
  accountLocale,
  findAccountByEmail,
  findAccountById,
  insertAccount,
  loadProfile,
  lockAccountByEmail,
} from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import {
  type EmailCodePayload,
  failEmailCode,
  insertEmailCode,
  liveEmailCode,
  useEmailCode,
} from '../email-codes-store.ts';
import { sha256Hex } from '../secrets.ts';
import { issueSession } from '../sessions.ts';
import { EMAIL_CODE_LIFETIME_MINUTES, issueTicket } from '../tickets-store.ts';
import { handOverToMailbox, proveMailedAddress } from './link-emails.ts';
import type { LinkOutcome } from './magic-link.ts';
import { completeRegistration } from './registration.ts';

/** Wrong codes a code survives: the fifth kills it. */
export const EMAIL_CODE_MAX_TRIES = 5;

const codeHash = (salt: string, code: string) => sha256Hex(`${salt}:${code}`);

/** POST /auth/otp/email: records the request; the code is mailed after the answer (emailCodeStep). */
export async function requestEmailCode(
  deps: AuthDeps,
  input: { email: string; createUser: boolean; redirectTo?: string },
): Promise<void> {
  if (!deps.mailer.sends) throw new AppError('EMAILS_DISABLED');
  await deps.mailer.sendLater(deps.db, 'email-otp', {
    email: input.email,
    createUser: input.createUser,
    ...(input.redirectTo === undefined ? {} : { redirectTo: input.redirectTo }),
  });
}

/** Whether a code may start an account for `email` (registration open to it). */
function mayRegister(deps: AuthDeps, email: string): boolean {
  return deps.config.AUTH_LOCAL_USERS_ENABLED && emailDomainAllowed(deps.config.ALLOWED_EMAIL_DOMAINS, email);
}

/**
 * The deferred step: a code for an active account; with `createUser`, a sign-up code for a pending one,
 * or for a new address (a pending account is made for it, as a password-less registration makes one:
 * no password, the default roles). Nothing for a disabled account, or an address that may not register.
 */
export async function emailCodeStep(deps: AuthDeps, tx: Queryable, input: DeferredInput): Promise<void> {
  let account: AccountRow | undefined = await lockAccountByEmail(tx, input.email);
  if (account?.disabled) return;
  if (!account) {
    if (!input.createUser || !mayRegister(deps, input.email)) return;
    const { accountId, userId } = await insertAccount(tx, {
      email: input.email,
      passwordHash: null,
      active: false,
      isAnonymous: false,
      defaultRole: deps.config.DEFAULT_USER_ROLE,
      roles: [...deps.config.DEFAULT_ALLOWED_USER_ROLES],
      userData: { display_name: input.email },
    });
    await deps.webhooks.queue(tx, userCreated(userId, input.email, false));
    account = await findAccountById(tx, accountId);
  } else if (!account.active && !input.createUser) return;
  if (!account?.email) return;
  const email = account.email;
  const now = deps.clock.now();
  const action = account.active ? 'log-in' : 'register';
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const salt = randomBytes(16).toString('base64url');
  const expiresAt = new Date(now.getTime() + EMAIL_CODE_LIFETIME_MINUTES * 60_000);
  const payload: EmailCodePayload = { salt, action, sent_to: email };
  await insertEmailCode(tx, { accountId: account.id, hash: codeHash(salt, code), payload, now, expiresAt });
  // With magic links on, the same email carries a link too (its own single-use ticket).
  let link = input.redirectTo ?? appHome(deps.config);
  if (deps.config.MAGIC_LINK_ENABLED) {
    const linkPayload: Record<string, unknown> = { action, sent_to: email };
    if (input.redirectTo) linkPayload.redirect_to = input.redirectTo;
    const { ticket: token } = await issueTicket(tx, deps.config, now, {
      accountId: account.id,
      purpose: 'magic-link',
      payload: linkPayload,
      lifetimeMinutes: EMAIL_CODE_LIFETIME_MINUTES,
    });
    link = serviceLink(deps.config, '/auth/magic-link', { action, token });
  }
  const profile = await loadProfile(tx, account.id);
  await deps.mailer.send(tx, {
    to: email,
    template: 'email-code',
    locals: {
      display_name: profile?.user.display_name ?? email,
      email,
      url: deps.config.SERVER_URL,
      code,
      link,
      action,
      minutes: EMAIL_CODE_LIFETIME_MINUTES,
      locale: await accountLocale(tx, account.id),
    },
    expiresAt,
  });
}

/**
 * POST /auth/otp/email/verify: a session (or the MFA step: the code stands for the password, not the
 * second factor). INVALID_CODE for a wrong, used, expired or dead code and for an address without one,
 * alike; a wrong code counts against the address's live code.
 */
export async function verifyEmailCode(
  deps: AuthDeps,
  input: { email: string; code: string; client: EventClient },
): Promise<LinkOutcome> {
  const now = deps.clock.now();
  const outcome = await deps.db.transaction(async (tx): Promise<LinkOutcome | undefined> => {
    const account = await findAccountByEmail(tx, input.email);
    const live = account ? await liveEmailCode(tx, account.id, now) : undefined;
    // Hashed and compared whether or not there is a code, so the time does not tell.
    const presented = codeHash(live?.payload.salt ?? 'none', input.code);
    if (!account || !live || !secretsEqual(presented, live.ticket_hash)) {
      if (live) await failEmailCode(tx, live.ticket_hash, now, EMAIL_CODE_MAX_TRIES);
      return undefined;
    }
    // The code was mailed to the address the account has now (not one it had before a change).
    if (live.payload.sent_to.toLowerCase() !== (account.email ?? '').toLowerCase()) return undefined;
    if (!(await useEmailCode(tx, live.ticket_hash, now))) return undefined;
    const used = { accountId: account.id, payload: { sent_to: live.payload.sent_to } };
    if (!account.active) {
      if (!(await completeRegistration(deps, tx, used, 'email-otp'))) return undefined;
    } else if (await proveMailedAddress(deps, tx, used, 'email-otp')) {
      // The address's first proof: the account goes to the mailbox's owner, as with a magic link.
      await handOverToMailbox(deps, tx, account.id, 'email-otp');
    }
    const current = await findAccountById(tx, account.id);
    if (!current?.active) return undefined;
    if (current.mfa_enabled) {
      const { ticket } = await issueTicket(tx, deps.config, now, {
        accountId: current.id,
        purpose: 'mfa-login',
        keepEarlier: true,
      });
      return { kind: 'mfa', ticket };
    }
    return {
      kind: 'session',
      session: await issueSession(deps, current.id, { db: tx, method: 'email-otp', client: input.client }),
    };
  });
  if (!outcome) throw new AppError('INVALID_CODE');
  return outcome;
}
