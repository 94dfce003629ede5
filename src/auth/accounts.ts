/**
 * Account life cycle: sign-in (password, anonymous, impersonation), password and email change,
 * self-deletion. Route handlers call one function here each; registration and activation are in
 * flows/registration.ts.
 */
import type { AppContext } from '../context.ts';
import type { Database } from '../db/database.ts';
import { AppError } from '../errors.ts';
import {
  type AccountProfile,
  type AccountRow,
  deleteUser,
  findAccountByUserId,
  insertAccount,
  loadProfileByEmail,
  passwordHashPrefixes,
  setPasswordHash,
  upgradePasswordHash,
} from './accounts-store.ts';
import {
  checkBreached,
  checkLoginPassword,
  hashKind,
  hashPassword,
  isHashingBusy,
  needsRehash,
  verifyPassword,
} from './passwords.ts';
import { assertReauthenticated, type Reauthentication } from './reauth.ts';
import { newestAttemptPasswordHash } from './registration-store.ts';
import { secretsEqual } from './secrets.ts';
import { endAllSessions, issueSession, type OwnSignIn, ownFamily, type Session } from './sessions.ts';
import { issueTicket, retireTickets } from './tickets-store.ts';

/** ALLOWED_EMAIL_DOMAINS: the domain itself or a dot-bounded subdomain (HBP's plain suffix let `notikea.se` match `ikea.se`). */
export function emailDomainAllowed(allowed: readonly string[], email: string): boolean {
  if (allowed.length === 0) return true;
  const domain = email.slice(email.lastIndexOf('@') + 1).toLowerCase();
  return allowed.some((d) => {
    const want = d.toLowerCase().replace(/^[@.]/, '');
    return domain === want || domain.endsWith(`.${want}`);
  });
}

export function assertEmailDomain(ctx: AppContext, email: string, field = 'email'): void {
  if (!emailDomainAllowed(ctx.config.ALLOWED_EMAIL_DOMAINS, email)) {
    throw new AppError('EMAIL_DOMAIN_NOT_ALLOWED', `"${field}" is not in an authorised domain`);
  }
}

export type LoginResult = { kind: 'session'; session: Session } | { kind: 'mfa'; ticket: string };

/**
 * Password sign-in. Unknown email, missing hash and wrong password all answer the same 401 after the same
 * amount of hashing work (see checkLoginPassword). `adminSecret` (USER_IMPERSONATION_ENABLED) replaces
 * the password check. The account is read with its roles and user row, so that a sign-in costs two
 * round trips: this read and the session insert.
 */
export async function loginWithPassword(
  ctx: AppContext,
  input: { email: string; password?: string; adminSecret?: string },
): Promise<LoginResult> {
  const c = ctx.config;
  const profile = await loadProfileByEmail(ctx.db, input.email);
  const impersonating = await checkImpersonation(ctx, input.adminSecret);
  if (!impersonating) {
    if (input.password === undefined) throw new AppError('VALIDATION', '"password" is required');
    await checkPassword(ctx, profile?.account, input.password);
  } else if (!profile) {
    throw new AppError('INVALID_CREDENTIALS');
  }
  const { account: acc } = profile as AccountProfile;
  // Checked after the password, so that it tells nothing to someone who does not know it.
  if (!acc.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
  if (acc.mfa_enabled) {
    const { ticket } = await issueTicket(ctx.db, c, ctx.clock.now(), {
      accountId: acc.id,
      purpose: 'mfa-login',
      keepEarlier: true,
    });
    return { kind: 'mfa', ticket };
  }
  return { kind: 'session', session: await issueSession(ctx, acc.id, { profile }) };
}

/** True when a valid admin secret was sent for impersonation; 401 for a wrong one. */
async function checkImpersonation(ctx: AppContext, adminSecret: string | undefined): Promise<boolean> {
  const c = ctx.config;
  if (!c.USER_IMPERSONATION_ENABLED || adminSecret === undefined || adminSecret === '') return false;
  // No configured secret means impersonation cannot succeed (HBP compared undefined === undefined).
  if (c.HASURA_GRAPHQL_ADMIN_SECRET === '' || !secretsEqual(adminSecret, c.HASURA_GRAPHQL_ADMIN_SECRET)) {
    throw new AppError('INVALID_ADMIN_SECRET');
  }
  return true;
}

/** How long the list of hash kinds in the database is trusted (hashes imported meanwhile wait this long). */
export const HASH_KINDS_TTL_MS = 60_000;

const hashKindsCache = new WeakMap<Database, { until: number; kinds: Promise<string[]> }>();

/**
 * The kinds of password hash accounts hold (bcrypt from HBP, argon2 with earlier ARGON2_* settings, the
 * current one), read at most once per HASH_KINDS_TTL_MS: a failed sign-in pads its work to one
 * verification of each. Only failures ask, so successful sign-ins never pay for the scan.
 */
function hashKindsInUse(ctx: AppContext): Promise<string[]> {
  const now = ctx.clock.now().getTime();
  const hit = hashKindsCache.get(ctx.db);
  if (hit && hit.until > now) return hit.kinds;
  const kinds = passwordHashPrefixes(ctx.db).then((prefixes) =>
    prefixes.map((p) => hashKind(`${p}$`)).filter((k): k is string => k !== undefined),
  );
  hashKindsCache.set(ctx.db, { until: now + HASH_KINDS_TTL_MS, kinds });
  kinds.catch(() => hashKindsCache.delete(ctx.db));
  return kinds;
}

/**
 * Verifies a password against an account (or a dummy when there is none); replaces outdated hashes. A
 * full hashing queue answers 503 PASSWORD_HASHING_BUSY whether or not the account exists; a rehash that
 * finds it full waits for a later sign-in instead of failing this one.
 */
async function checkPassword(
  ctx: AppContext,
  account: AccountRow | undefined,
  password: string,
): Promise<void> {
  // A pending account's password is its latest registration attempt's, not the account's (see
  // flows/registration.ts): the right one hears ACCOUNT_NOT_ACTIVATED, as before attempts existed.
  const pending = account !== undefined && !account.active && account.password_hash === null;
  const stored = pending
    ? await newestAttemptPasswordHash(ctx.db, account.id)
    : (account?.password_hash ?? null);
  if (!(await checkLoginPassword(ctx.config, stored, password, () => hashKindsInUse(ctx)))) {
    throw new AppError('INVALID_CREDENTIALS');
  }
  if (account && !pending && stored !== null && needsRehash(ctx.config, stored)) {
    let fresh: string;
    try {
      fresh = await hashPassword(ctx.config, password);
    } catch (err) {
      if (isHashingBusy(err)) return;
      throw err;
    }
    await upgradePasswordHash(ctx.db, account.id, stored, fresh);
  }
}

/** Anonymous sign-in (ANONYMOUS_USERS_ENABLED): a fresh active account with no email or password. */
export async function loginAnonymously(ctx: AppContext): Promise<Session> {
  const role = ctx.config.DEFAULT_ANONYMOUS_ROLE;
  return ctx.db.transaction(async (tx) => {
    const { accountId } = await insertAccount(tx, {
      email: null,
      passwordHash: null,
      active: true,
      isAnonymous: true,
      defaultRole: role,
      roles: [role],
      userData: { display_name: 'Anonymous user' },
    });
    return issueSession(ctx, accountId, { db: tx });
  });
}

/** The account of the signed-in caller; 401 when it no longer exists (deleted since the token was issued). */
export async function callerAccount(ctx: AppContext, userId: string): Promise<AccountRow> {
  const account = await findAccountByUserId(ctx.db, userId);
  if (!account) throw new AppError('UNAUTHENTICATED');
  return account;
}

/**
 * Changes the caller's password. The current password is required when the account has one; an account
 * without one (magic link, anonymous) may set one only within SENSITIVE_ACTION_WINDOW of a sign-in, since
 * a bearer token alone must not add a credential (see reauth.ts). Every other session of the account ends
 * in the same transaction (HBP kept them all, so a thief stayed signed in). The caller's own sign-in
 * (`own`, see ownFamily) is kept.
 */
export async function changePassword(
  ctx: AppContext,
  userId: string,
  input: { oldPassword?: string; newPassword: string; own?: OwnSignIn; reauth: Reauthentication },
): Promise<void> {
  const account = await callerAccount(ctx, userId);
  if (account.password_hash !== null) {
    if (input.oldPassword === undefined) throw new AppError('VALIDATION', '"old_password" is required');
    if (!(await verifyPassword(ctx.config, account.password_hash, input.oldPassword))) {
      throw new AppError('INCORRECT_PASSWORD');
    }
  } else {
    await assertReauthenticated(ctx, account, input.reauth);
  }
  await checkBreached(ctx.config, input.newPassword);
  const hash = await hashPassword(ctx.config, input.newPassword);
  await ctx.db.transaction(async (tx) => {
    const keep = input.own === undefined ? undefined : await ownFamily(ctx, account.id, input.own, tx);
    await setPasswordHash(tx, account.id, hash);
    await retireTickets(tx, ctx.clock.now(), account.id, 'password-reset');
    await endAllSessions(ctx, account.id, keep, tx);
  });
}

/**
 * Deletes the caller's public.users row; the account, roles, sessions and tickets cascade with it. Needs
 * proof beyond the bearer token (reauth.ts).
 */
export async function deleteOwnAccount(
  ctx: AppContext,
  userId: string,
  reauth: Reauthentication,
): Promise<void> {
  const account = await findAccountByUserId(ctx.db, userId);
  if (!account) throw new AppError('CANNOT_DELETE_ACCOUNT');
  await assertReauthenticated(ctx, account, reauth);
  if (!(await deleteUser(ctx.db, userId))) throw new AppError('CANNOT_DELETE_ACCOUNT');
}
