/**
 * Account life cycle: sign-in (password, anonymous, impersonation), password and email change,
 * self-deletion. Route handlers call one function here each; registration and activation are in
 * flows/registration.ts.
 */
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
import type { SessionDeps } from './deps.ts';
import { checkBreached, hashKind, isHashingBusy } from './passwords.ts';
import { assertReauthenticated, type Reauthentication } from './reauth.ts';
import { newestAttemptPasswordHash } from './registration-store.ts';
import { revoke } from './revocations.ts';
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

export function assertEmailDomain(deps: Pick<SessionDeps, 'config'>, email: string, field = 'email'): void {
  if (!emailDomainAllowed(deps.config.ALLOWED_EMAIL_DOMAINS, email)) {
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
  deps: SessionDeps,
  input: { email: string; password?: string; adminSecret?: string },
): Promise<LoginResult> {
  const c = deps.config;
  const profile = await loadProfileByEmail(deps.db, input.email);
  const impersonating = await checkImpersonation(deps, input.adminSecret);
  if (!impersonating) {
    if (input.password === undefined) throw new AppError('VALIDATION', '"password" is required');
    await checkPassword(deps, profile?.account, input.password);
  } else if (!profile) {
    throw new AppError('INVALID_CREDENTIALS');
  }
  const { account: acc } = profile as AccountProfile;
  // Checked after the password, so that it tells nothing to someone who does not know it.
  if (!acc.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
  // Before the MFA step too, so a disabled account is not asked for a code it cannot use.
  if (acc.disabled) throw new AppError('ACCOUNT_DISABLED');
  if (acc.mfa_enabled) {
    const { ticket } = await issueTicket(deps.db, c, deps.clock.now(), {
      accountId: acc.id,
      purpose: 'mfa-login',
      keepEarlier: true,
    });
    return { kind: 'mfa', ticket };
  }
  return { kind: 'session', session: await issueSession(deps, acc.id, { profile, method: 'password' }) };
}

/** True when a valid admin secret was sent for impersonation; 401 for a wrong one. */
async function checkImpersonation(deps: SessionDeps, adminSecret: string | undefined): Promise<boolean> {
  const c = deps.config;
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
function hashKindsInUse(deps: SessionDeps): Promise<string[]> {
  const now = deps.clock.now().getTime();
  const hit = hashKindsCache.get(deps.db);
  if (hit && hit.until > now) return hit.kinds;
  const kinds = passwordHashPrefixes(deps.db).then((prefixes) =>
    prefixes.map((p) => hashKind(`${p}$`)).filter((k): k is string => k !== undefined),
  );
  hashKindsCache.set(deps.db, { until: now + HASH_KINDS_TTL_MS, kinds });
  kinds.catch(() => hashKindsCache.delete(deps.db));
  return kinds;
}

/**
 * Verifies a password against an account (or a dummy when there is none); replaces outdated hashes. A
 * full hashing queue answers 503 PASSWORD_HASHING_BUSY whether or not the account exists; a rehash that
 * finds it full waits for a later sign-in instead of failing this one.
 */
async function checkPassword(
  deps: SessionDeps,
  account: AccountRow | undefined,
  password: string,
): Promise<void> {
  // A pending account's password is its latest registration attempt's, not the account's (see
  // flows/registration.ts): the right one hears ACCOUNT_NOT_ACTIVATED, as before attempts existed.
  const pending = account !== undefined && !account.active && account.password_hash === null;
  const stored = pending
    ? await newestAttemptPasswordHash(deps.db, account.id)
    : (account?.password_hash ?? null);
  if (!(await deps.passwords.checkLogin(stored, password, () => hashKindsInUse(deps)))) {
    throw new AppError('INVALID_CREDENTIALS');
  }
  if (account && !pending && stored !== null && deps.passwords.needsRehash(stored)) {
    let fresh: string;
    try {
      fresh = await deps.passwords.hash(password);
    } catch (err) {
      if (isHashingBusy(err)) return;
      throw err;
    }
    await upgradePasswordHash(deps.db, account.id, stored, fresh);
  }
}

/** Anonymous sign-in (ANONYMOUS_USERS_ENABLED): a fresh active account with no email or password. */
export async function loginAnonymously(deps: SessionDeps): Promise<Session> {
  const role = deps.config.DEFAULT_ANONYMOUS_ROLE;
  return deps.db.transaction(async (tx) => {
    const { accountId } = await insertAccount(tx, {
      email: null,
      passwordHash: null,
      active: true,
      isAnonymous: true,
      defaultRole: role,
      roles: [role],
      userData: { display_name: 'Anonymous user' },
    });
    return issueSession(deps, accountId, { db: tx, method: 'anonymous' });
  });
}

/** The account of the signed-in caller; 401 when it no longer exists (deleted since the token was issued). */
export async function callerAccount(deps: SessionDeps, userId: string): Promise<AccountRow> {
  const account = await findAccountByUserId(deps.db, userId);
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
  deps: SessionDeps,
  userId: string,
  input: { oldPassword?: string; newPassword: string; own?: OwnSignIn; reauth: Reauthentication },
): Promise<void> {
  const account = await callerAccount(deps, userId);
  if (account.password_hash !== null) {
    if (input.oldPassword === undefined) throw new AppError('VALIDATION', '"old_password" is required');
    if (!(await deps.passwords.verify(account.password_hash, input.oldPassword))) {
      throw new AppError('INCORRECT_PASSWORD');
    }
  } else {
    await assertReauthenticated(deps, account, input.reauth);
  }
  await checkBreached(deps.config, input.newPassword);
  const hash = await deps.passwords.hash(input.newPassword);
  await deps.db.transaction(async (tx) => {
    const keep = input.own === undefined ? undefined : await ownFamily(deps, account.id, input.own, tx);
    await setPasswordHash(tx, account.id, hash);
    await retireTickets(tx, deps.clock.now(), account.id, 'password-reset');
    await endAllSessions(deps, account.id, keep, tx);
  });
}

/**
 * Deletes the caller's public.users row; the account, roles, sessions and tickets cascade with it. Needs
 * proof beyond the bearer token (reauth.ts).
 */
export async function deleteOwnAccount(
  deps: SessionDeps,
  userId: string,
  reauth: Reauthentication,
): Promise<void> {
  const account = await findAccountByUserId(deps.db, userId);
  if (!account) throw new AppError('CANNOT_DELETE_ACCOUNT');
  await assertReauthenticated(deps, account, reauth);
  await deps.db.transaction(async (tx) => {
    if (!(await deleteUser(tx, userId))) throw new AppError('CANNOT_DELETE_ACCOUNT');
    // Its sessions went with it; every access token of the user is refused from now on.
    await revoke(deps, tx, { userId });
  });
}
