/**
 * Sign-in (POST /auth/login), in one call: `signIn` chooses the proof a request offers (a password, the
 * admin secret of impersonation, none for a magic link, or a new anonymous account), counts it as a guess
 * where it is one (http/guesses.ts), and answers with a session, the MFA step or "link sent". Refusals
 * are AppErrors from the catalogue. Unknown email and wrong password answer the same 401 after the same
 * amount of hashing work (checkPassword), so neither status nor timing tells who has an account.
 */

import { secretsEqual } from '../constant-time.ts';
import type { Database } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/record.ts';
import type { EventClient } from '../events/types.ts';
import { ADMIN_SECRET_SUBJECT, type GuessLimiter, passwordSubject } from '../http/guesses.ts';
import { signInEvent } from '../metrics/events.ts';
import { userCreated } from '../webhooks/webhooks.ts';
import {
  type AccountRow,
  insertAccount,
  loadProfileByEmail,
  passwordHashPrefixes,
  upgradePasswordHash,
} from './accounts-store.ts';
import type { AuthDeps, SessionDeps } from './deps.ts';
import { requestMagicLogin } from './flows/magic-link.ts';
import { hashKind, isHashingBusy } from './passwords.ts';
import { checkRedirect } from './redirects.ts';
import { newestAttemptPasswordHash } from './registration-store.ts';
import { issueSession, type Session } from './sessions.ts';
import { issueTicket } from './tickets-store.ts';

/** What a sign-in request offers, as the client sent it. */
export interface SignInRequest {
  readonly email?: string;
  readonly password?: string;
  /** `true`: sign in as a new anonymous user (ANONYMOUS_USERS_ENABLED). */
  readonly anonymous?: boolean;
  /** The `x-admin-secret` header: with USER_IMPERSONATION_ENABLED, it stands in for the password. */
  readonly adminSecret?: string;
  /** Where the magic link of a password-less sign-in leads. */
  readonly redirectTo?: string;
  /** The client's address: guesses are limited per (account, address) and per address. */
  readonly address: string;
  /** The client's User-Agent (stored with the session and its sign-in event). */
  readonly userAgent?: string | null;
}

/** The request limits a sign-in counts against (the route's scope holds them). */
export interface SignInLimits {
  readonly guesses: GuessLimiter;
  /** Counts an email requested for `address` (routes/email-quota.ts); 429 over the limit. */
  emailQuota(address: string): Promise<void>;
}

export type SignInResult =
  | { kind: 'session'; session: Session }
  | { kind: 'mfa'; ticket: string }
  | { kind: 'magic-link' };

/** The proof that opens an account, once chosen. */
type Proof = { kind: 'password'; password: string } | { kind: 'admin-secret'; secret: string };

export async function signIn(
  deps: AuthDeps,
  limits: SignInLimits,
  req: SignInRequest,
): Promise<SignInResult> {
  const c = deps.config;
  if (req.anonymous === true) {
    if (req.email !== undefined || req.password !== undefined) {
      throw new AppError('VALIDATION', '"anonymous" cannot be combined with "email" or "password"');
    }
    const session = await signInAnonymously(deps, clientOf(req));
    signInEvent('anonymous', 'success');
    return { kind: 'session', session };
  }
  if (req.email === undefined) throw new AppError('VALIDATION', '"email" is required');
  // With impersonation on, a non-empty admin secret replaces the password check, so the guess is at the
  // secret, not at this account's password.
  const proof: Proof | undefined =
    c.USER_IMPERSONATION_ENABLED && req.adminSecret
      ? { kind: 'admin-secret', secret: req.adminSecret }
      : req.password !== undefined
        ? { kind: 'password', password: req.password }
        : undefined;
  if (!proof) {
    if (!c.MAGIC_LINK_ENABLED) throw new AppError('VALIDATION', '"password" is required');
    // The link goes out by email only, after this answer; never a session or cookie here (HBP D1).
    await limits.emailQuota(req.email);
    await requestMagicLogin(deps, { email: req.email, redirectTo: checkRedirect(c, req.redirectTo) });
    return { kind: 'magic-link' };
  }
  const impersonating = proof.kind === 'admin-secret';
  const guess = await limits.guesses.begin(
    impersonating ? ADMIN_SECRET_SUBJECT : passwordSubject(req.email),
    req.address,
  );
  let result: Exclude<SignInResult, { kind: 'magic-link' }>;
  try {
    result = await openAccount(deps, req.email, proof, clientOf(req));
  } catch (err) {
    // Only a wrong credential stays counted; anything else (a right password for a disabled account, a
    // busy hasher) did not test it, or told the truth to whoever knew it.
    const wrong = impersonating ? 'INVALID_ADMIN_SECRET' : 'INVALID_CREDENTIALS';
    if (!(err instanceof AppError && err.code === wrong)) await guess.abandon();
    throw err;
  }
  await guess.succeeded();
  signInEvent('password', result.kind === 'mfa' ? 'mfa_required' : 'success');
  return result;
}

/**
 * Checks the proof against the account named by `email` and opens it: a session, or the MFA step. The
 * account is read with its roles and user row, so that a sign-in costs two round trips: this read and
 * the session insert.
 */
async function openAccount(
  deps: SessionDeps,
  email: string,
  proof: Proof,
  client: EventClient,
): Promise<Exclude<SignInResult, { kind: 'magic-link' }>> {
  const c = deps.config;
  const profile = await loadProfileByEmail(deps.db, email);
  if (proof.kind === 'admin-secret') {
    // No configured secret means impersonation cannot succeed (HBP compared undefined === undefined).
    if (c.HASURA_GRAPHQL_ADMIN_SECRET === '' || !secretsEqual(proof.secret, c.HASURA_GRAPHQL_ADMIN_SECRET)) {
      throw new AppError('INVALID_ADMIN_SECRET');
    }
  } else {
    try {
      await checkPassword(deps, profile?.account, proof.password);
    } catch (err) {
      if (err instanceof AppError && err.code === 'INVALID_CREDENTIALS')
        await failedSignIn(deps, profile?.account.id, client);
      throw err;
    }
  }
  // Impersonating an unknown address; a password never gets here without an account (the dummy fails).
  if (!profile) throw new AppError('INVALID_CREDENTIALS');
  const acc = profile.account;
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
  return {
    kind: 'session',
    session: await issueSession(deps, acc.id, { profile, method: 'password', client }),
  };
}

/** Stands in for an account that does not exist, so a wrong guess costs the same statement either way. */
const NO_ACCOUNT = '00000000-0000-0000-0000-000000000000';

/**
 * Puts a wrong password in the owner's feed (at most one a minute per account: recordEvent). For an
 * unknown address the same statement runs and writes nothing, so the answer's timing does not tell
 * whether the address has an account.
 */
async function failedSignIn(deps: SessionDeps, accountId: string | undefined, client: EventClient) {
  await recordEvent(deps, deps.db, {
    type: 'sign_in_failed',
    accountId: accountId ?? NO_ACCOUNT,
    client,
    details: { reason: 'password' },
  });
}

function clientOf(req: SignInRequest): EventClient {
  return { ip: req.address, userAgent: req.userAgent ?? null };
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
async function signInAnonymously(deps: SessionDeps, client: EventClient): Promise<Session> {
  const role = deps.config.DEFAULT_ANONYMOUS_ROLE;
  return deps.db.transaction(async (tx) => {
    const { accountId, userId } = await insertAccount(tx, {
      email: null,
      passwordHash: null,
      active: true,
      isAnonymous: true,
      defaultRole: role,
      roles: [role],
      userData: { display_name: 'Anonymous user' },
    });
    await deps.webhooks?.queue(tx, userCreated(userId, null, true, { anonymous: true }));
    return issueSession(deps, accountId, { db: tx, method: 'anonymous', client });
  });
}
