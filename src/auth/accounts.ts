/**
 * Account life cycle: registration, sign-in (password, anonymous, impersonation), activation, password
 * and email change, self-deletion. Route handlers call one function here each.
 */
import type { AppContext } from '../context.ts';
import type { Database, Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { issueActivation } from '../mail/flows/activation.ts';
import { setAccountLocale } from '../mail/mail-store.ts';
import {
  type AccountProfile,
  type AccountRow,
  activateAccount,
  deleteUser,
  findAccountByEmail,
  findAccountByUserId,
  insertAccount,
  loadProfile,
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
import type { PublicUser } from './schemas.ts';
import { secretsEqual } from './secrets.ts';
import {
  endAllSessions,
  issueSession,
  type OwnSignIn,
  ownFamily,
  publicUser,
  type Session,
} from './sessions.ts';
import { consumeTicket, issueTicket, retireTickets } from './tickets-store.ts';

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

export interface RegisterInput {
  email: string;
  password?: string;
  userData?: Record<string, unknown>;
  registerOptions?: { allowed_roles?: string[]; default_role?: string; default_roles?: string };
  /** Target of the activation or magic link, already checked against ALLOWED_REDIRECT_URLS. */
  redirectTo?: string;
  /** Language of the account's emails (EMAIL_TEMPLATES_DIR/<template>/<locale>/). */
  locale?: string;
}

export type RegisterResult = { user: PublicUser; session?: Session };

/** Picks and checks the roles of a new account (contract §4.1 step 5). */
export function chooseRoles(
  ctx: AppContext,
  opts: RegisterInput['registerOptions'],
): { defaultRole: string; roles: string[] } {
  const c = ctx.config;
  if (
    opts?.default_role !== undefined &&
    opts.default_roles !== undefined &&
    opts.default_role !== opts.default_roles
  ) {
    throw new AppError(
      'VALIDATION',
      '"register_options.default_roles" must match "register_options.default_role"',
    );
  }
  const defaultRole = opts?.default_role ?? opts?.default_roles ?? c.DEFAULT_USER_ROLE;
  const roles = [...new Set(opts?.allowed_roles ?? c.DEFAULT_ALLOWED_USER_ROLES)];
  if (!roles.includes(defaultRole)) throw new AppError('DEFAULT_ROLE_NOT_ALLOWED');
  if (roles.some((r) => !c.ALLOWED_USER_ROLES.includes(r))) throw new AppError('ROLES_NOT_ALLOWED');
  return { defaultRole, roles };
}

/**
 * What every new account goes through before its insert: an allowed email that no account has, its roles
 * (contract §4.1), and its `public.users` row (display name defaults to the email).
 */
export async function planNewAccount(
  ctx: AppContext,
  input: RegisterInput,
): Promise<{ defaultRole: string; roles: string[]; userData: Record<string, unknown> }> {
  assertEmailDomain(ctx, input.email);
  const existing = await findAccountByEmail(ctx.db, input.email);
  if (existing) throw new AppError(existing.active ? 'ACCOUNT_EXISTS' : 'ACCOUNT_EXISTS_INACTIVE');
  const { defaultRole, roles } = chooseRoles(ctx, input.registerOptions);
  return { defaultRole, roles, userData: { display_name: input.email, ...(input.userData ?? {}) } };
}

/** The public user of an account just created inactive in `tx`, its locale recorded for the emails it gets. */
export async function pendingUser(tx: Queryable, accountId: string, locale?: string): Promise<PublicUser> {
  if (locale) await setAccountLocale(tx, accountId, locale);
  const profile = await loadProfile(tx, accountId);
  if (!profile) throw new Error(`account ${accountId} has no profile inside its own transaction`);
  return publicUser(profile);
}

/**
 * Creates an account with a password. Active accounts (AUTO_ACTIVATE_NEW_USERS) get a session; inactive
 * ones get no tokens at all (the spec; HBP handed tokens to inactive accounts) but an activation email,
 * sent inside the transaction.
 */
export async function registerWithPassword(
  ctx: AppContext,
  input: RegisterInput & { password: string },
): Promise<RegisterResult> {
  const c = ctx.config;
  const { defaultRole, roles, userData } = await planNewAccount(ctx, input);
  await checkBreached(c, input.password);
  const passwordHash = await hashPassword(c, input.password);
  const active = c.AUTO_ACTIVATE_NEW_USERS;

  type Created = { user: PublicUser; session?: Session };
  return ctx.db.transaction(async (tx): Promise<Created> => {
    const { accountId } = await insertAccount(tx, {
      email: input.email,
      passwordHash,
      active,
      isAnonymous: false,
      defaultRole,
      roles,
      userData,
    });
    if (active) {
      const session = await issueSession(ctx, accountId, { db: tx });
      return { user: session.user, session };
    }
    const user = await pendingUser(tx, accountId, input.locale);
    // Sent before commit: when SMTP refuses (503) the account is rolled back with its ticket.
    await issueActivation(ctx, tx, {
      accountId,
      email: input.email,
      displayName: user.display_name ?? input.email,
      redirectTo: input.redirectTo,
    });
    return { user };
  });
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
  const stored = account?.password_hash ?? null;
  if (!(await checkLoginPassword(ctx.config, stored, password, () => hashKindsInUse(ctx)))) {
    throw new AppError('INVALID_CREDENTIALS');
  }
  if (account && stored !== null && needsRehash(ctx.config, stored)) {
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

/**
 * Activates the account of an 'activation' ticket and opens its first session; undefined when the ticket
 * is not valid. `redirectTo` is the checked `redirect_to` given at registration, if any.
 */
export async function activateWithTicket(
  ctx: AppContext,
  ticket: string,
): Promise<{ session: Session; redirectTo?: string } | undefined> {
  return ctx.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, ctx.clock.now(), ticket, 'activation');
    if (!used) return undefined;
    if (!(await activateAccount(tx, used.accountId))) return undefined;
    const redirectTo = typeof used.payload.redirect_to === 'string' ? used.payload.redirect_to : undefined;
    return { session: await issueSession(ctx, used.accountId, { db: tx }), redirectTo };
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
