/**
 * Registration and activation.
 *
 * With AUTO_ACTIVATE_NEW_USERS=false (and for password-less registration) an account waits for its
 * address to be proven by a link followed from the mailbox. Anyone can ask to register any address, so
 * until then nothing a request chose is put on the account: each request is a registration attempt
 * (auth.registration_attempts) holding its password hash, roles, default role, user fields and locale,
 * and its link names that attempt. The pending account row holds no password and the default roles.
 * Following a link activates the account and gives it the choices of the link's own attempt, but only
 * when no other link was live beside it: when the address received more than one request (a second
 * registration, a resend), the mailbox's owner cannot tell whose link is whose, so activation proves the
 * address and opens a session but keeps no password and no choice (defaults; the owner sets a password
 * with the reset flow or change-password). See docs/email-flows.md, "Registration and activation".
 *
 * Registration also answers the same for a new, a pending and an active address (status, body and
 * time: the password is hashed either way); the mailbox learns which it was by email.
 *
 * A sign-up with a passkey (passkeys/ceremonies.ts) follows the same rules with the passkey in place of
 * the password: while the account waits, the passkey belongs to its attempt (auth.passkeys.attempt_id)
 * and signs nothing in; activation gives the account the passkey of the link's attempt only when that
 * link was alone, and drops every other passkey made before the proof.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import type { DeferredInput } from '../../mail/port.ts';
import { userCreated } from '../../webhooks/webhooks.ts';
import { assertEmailDomain } from '../accounts.ts';
import {
  type AccountRow,
  accountLocale,
  activateAccount,
  clearAccountLocale,
  findAccountByEmail,
  findAccountById,
  insertAccount,
  lockAccountByEmail,
  markEmailProven,
  operatorMadeUntouched,
  type ProofMethod,
  probeUserRow,
  resettableUserColumns,
  setAccountCredentials,
  setAccountLocale,
  setUserFields,
} from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import { deactivateMfa } from '../mfa/mfa-store.ts';
import { insertPasskey, settlePendingPasskeys } from '../passkeys/passkeys-store.ts';
import { checkBreached } from '../passwords.ts';
import {
  type AttemptRow,
  attemptsLiveSince,
  deleteAttempts,
  findAttempt,
  insertAttempt,
  newestAttempt,
  purgeStaleAttempts,
} from '../registration-store.ts';
import type { PublicUser } from '../schemas.ts';
import { issueSession, type Session } from '../sessions.ts';
import { deleteAccountSessions } from '../sessions-store.ts';
import {
  type ConsumedTicket,
  consumeTicket,
  retireTickets,
  ticketLifetimeMinutes,
} from '../tickets-store.ts';
import { issueActivation, issueMagicLink, proveMailedAddress, sendAccountExists } from './link-emails.ts';

export interface RegisterInput {
  email: string;
  /** Absent: password-less registration (MAGIC_LINK_ENABLED), activated by a magic link. */
  password?: string;
  userData?: Record<string, unknown>;
  registerOptions?: { allowed_roles?: string[]; default_role?: string; default_roles?: string };
  /** Target of the activation or magic link, already checked against ALLOWED_REDIRECT_URLS. */
  redirectTo?: string;
  /** Language of the account's emails (EMAIL_TEMPLATES_DIR/<template>/<locale>/). */
  locale?: string;
  /** The registering client (its first session's, with AUTO_ACTIVATE_NEW_USERS). */
  client?: EventClient;
}

export type RegisterResult = { user: PublicUser; session?: Session };

/** A verified passkey that a sign-up makes the account's only credential (passkeys/ceremonies.ts). */
export interface SignupPasskey {
  credentialId: string;
  publicKey: Uint8Array;
  counter: number;
  transports: readonly string[];
  backedUp: boolean;
  userHandle: string;
  name: string;
}

/** Picks and checks the roles of a new account (contract §4.1 step 5). */
export function chooseRoles(
  deps: AuthDeps,
  opts: RegisterInput['registerOptions'],
): { defaultRole: string; roles: string[] } {
  const c = deps.config;
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

/** What one registration request asks for, checked and hashed. */
interface Plan {
  email: string;
  passwordless: boolean;
  passwordHash: string | null;
  defaultRole: string;
  roles: string[];
  /** public.users columns: display_name (defaults to the email) and REGISTRATION_CUSTOM_FIELDS. */
  userData: Record<string, unknown>;
  locale?: string;
  redirectTo?: string;
  /** A sign-up with a passkey: the passkey instead of a password (never both). */
  passkey?: SignupPasskey;
  /** The client registering (its session and events say where the sign-up came from). */
  client?: EventClient;
}

/** What a passkey sign-up chose, checked when its options were asked for and kept with the challenge. */
export interface PasskeySignupChoice {
  email: string;
  defaultRole: string;
  roles: string[];
  userData: Record<string, unknown>;
  locale?: string;
  redirectTo?: string;
}

/**
 * The checks of POST /auth/register that a passkey sign-up makes before the browser creates its passkey
 * (so nobody is left holding a passkey the service then refuses): the email domain, an address already
 * taken when AUTO_ACTIVATE_NEW_USERS answers with tokens (without it, every address gets the same answer
 * and the mailbox is told), the roles and the user fields. HIBP does not apply: there is no password.
 */
export async function choosePasskeySignup(
  deps: AuthDeps,
  input: RegisterInput,
): Promise<PasskeySignupChoice> {
  const c = deps.config;
  assertEmailDomain(deps, input.email);
  if (c.AUTO_ACTIVATE_NEW_USERS) {
    const existing = await findAccountByEmail(deps.db, input.email);
    if (existing) throw new AppError(existing.active ? 'ACCOUNT_EXISTS' : 'ACCOUNT_EXISTS_INACTIVE');
  }
  const { defaultRole, roles } = chooseRoles(deps, input.registerOptions);
  const userData = { display_name: input.email, ...(input.userData ?? {}) };
  // Rolled back: only whether the fields fit public.users (types, NOT NULL, CHECK) is learnt.
  await deps.db.transaction((tx) => probeUserRow(tx, userData));
  return {
    email: input.email,
    defaultRole,
    roles,
    userData,
    locale: input.locale,
    redirectTo: input.redirectTo,
  };
}

/**
 * The account of a passkey sign-up whose passkey has been verified, under the rules of register(): with
 * AUTO_ACTIVATE_NEW_USERS an active account and a session; otherwise a pending account (or an attempt
 * on one) whose passkey belongs to the attempt until its link, followed alone, activates the account
 * (see the module comment), and `{user}` only, the same for a new, a pending and an active address.
 */
export async function registerWithPasskey(
  deps: AuthDeps,
  choice: PasskeySignupChoice,
  passkey: SignupPasskey,
  client?: EventClient,
): Promise<RegisterResult> {
  const plan: Plan = {
    email: choice.email,
    passwordless: false,
    passwordHash: null,
    defaultRole: choice.defaultRole,
    roles: choice.roles,
    userData: choice.userData,
    locale: choice.locale,
    redirectTo: choice.redirectTo,
    passkey,
    client,
  };
  if (deps.config.AUTO_ACTIVATE_NEW_USERS) return registerActive(deps, plan);
  try {
    return await registerPending(deps, plan, true);
  } catch (err) {
    if (err instanceof AppError && err.code === 'ACCOUNT_EXISTS') return registerPending(deps, plan, true);
    throw err;
  }
}

/**
 * Stores a sign-up's passkey: the account's (an event says it was added), or (`attemptId`) its attempt's
 * until the activation, which is not yet the account's and tells its owner nothing.
 */
async function storeSignupPasskey(
  deps: AuthDeps,
  tx: Queryable,
  accountId: string,
  attemptId: string | null,
  p: SignupPasskey,
  client?: EventClient,
): Promise<void> {
  const stored = await insertPasskey(tx, {
    id: randomUUID(),
    accountId,
    attemptId,
    credentialId: p.credentialId,
    publicKey: p.publicKey,
    counter: p.counter,
    transports: p.transports,
    backedUp: p.backedUp,
    userHandle: p.userHandle,
    name: p.name,
    createdAt: deps.clock.now(),
  });
  if (attemptId === null)
    await recordEvent(deps, tx, {
      type: 'passkey_added',
      details: { passkey: stored.id, name: stored.name },
      accountId,
      client,
    });
}

/**
 * POST /auth/register. With AUTO_ACTIVATE_NEW_USERS and a password: an active account and a session.
 * Otherwise an account waiting for activation (see the module comment) and `{user}` only. Every refusal
 * that depends on the request alone (domain, roles, breached password, user fields) comes before the
 * address is looked up, so it is the same for every address.
 */
export async function register(deps: AuthDeps, input: RegisterInput): Promise<RegisterResult> {
  const c = deps.config;
  const passwordless = input.password === undefined;
  if (passwordless && !deps.mailer.sends) throw new AppError('EMAILS_DISABLED');
  assertEmailDomain(deps, input.email);
  // Auto-activation answers a new address with tokens, which a taken address cannot get: the spec forces
  // a difference there, so the refusal is said at once (HBP's messages).
  const uniform = !c.AUTO_ACTIVATE_NEW_USERS;
  if (!uniform) {
    const existing = await findAccountByEmail(deps.db, input.email);
    if (existing) throw new AppError(existing.active ? 'ACCOUNT_EXISTS' : 'ACCOUNT_EXISTS_INACTIVE');
  }
  const { defaultRole, roles } = chooseRoles(deps, input.registerOptions);
  let passwordHash: string | null = null;
  if (input.password !== undefined) {
    await checkBreached(c, input.password);
    // Hashed whether or not the address is taken, so the time of the answer does not tell.
    passwordHash = await deps.passwords.hash(input.password);
  }
  const plan: Plan = {
    email: input.email,
    passwordless,
    passwordHash,
    defaultRole,
    roles,
    userData: { display_name: input.email, ...(input.userData ?? {}) },
    locale: input.locale,
    redirectTo: input.redirectTo,
    client: input.client,
  };
  if (c.AUTO_ACTIVATE_NEW_USERS && !passwordless) return registerActive(deps, plan);
  try {
    return await registerPending(deps, plan, uniform);
  } catch (err) {
    // Two registrations of a new address raced and the other one created the account: this request
    // is now an attempt on it, answered like any other.
    if (uniform && err instanceof AppError && err.code === 'ACCOUNT_EXISTS') {
      return registerPending(deps, plan, uniform);
    }
    throw err;
  }
}

function registrationUser(
  id: string,
  email: string,
  fields: { display_name: string | null; avatar_url: string | null },
): PublicUser {
  const user: PublicUser = { id, display_name: fields.display_name, email };
  if (typeof fields.avatar_url === 'string') user.avatar_url = fields.avatar_url;
  return user;
}

async function registerActive(deps: AuthDeps, plan: Plan): Promise<RegisterResult> {
  return deps.db.transaction(async (tx) => {
    await probeUserRow(tx, plan.userData);
    const { accountId, userId } = await insertAccount(tx, {
      email: plan.email,
      passwordHash: plan.passwordHash,
      active: true,
      isAnonymous: false,
      defaultRole: plan.defaultRole,
      roles: plan.roles,
      userData: plan.userData,
    });
    await deps.webhooks.queue(tx, userCreated(userId, plan.email, true));
    if (plan.locale) await setAccountLocale(tx, accountId, plan.locale);
    if (plan.passkey) await storeSignupPasskey(deps, tx, accountId, null, plan.passkey, plan.client);
    const session = await issueSession(deps, accountId, {
      db: tx,
      method: plan.passkey ? 'passkey' : 'password',
      client: plan.client,
    });
    return { user: session.user, session };
  });
}

/**
 * A registration that waits for the address to be proven. Its emails are queued in the outbox in the same
 * transaction, for a new address as for a taken one, and delivered after the commit: an SMTP outage delays
 * them and never fails the request.
 */
async function registerPending(deps: AuthDeps, plan: Plan, uniform: boolean): Promise<RegisterResult> {
  const sends = deps.mailer.sends;
  return deps.db.transaction(async (tx) => {
    const fields = await probeUserRow(tx, plan.userData);
    const existing = await lockAccountByEmail(tx, plan.email);
    if (existing && !uniform) {
      throw new AppError(existing.active ? 'ACCOUNT_EXISTS' : 'ACCOUNT_EXISTS_INACTIVE');
    }
    if (!existing) {
      // The first request's user fields go on the row (the operator's NOT NULL or CHECK columns hold, as
      // before); activation overwrites them. Without emails no link can prove the address: the account
      // waits for an operator, who activates the registrant's choices as given.
      const pendingDefaults = chooseRoles(deps, undefined);
      const { accountId, userId } = await insertAccount(tx, {
        email: plan.email,
        passwordHash: sends ? null : plan.passwordHash,
        active: false,
        isAnonymous: false,
        defaultRole: sends ? pendingDefaults.defaultRole : plan.defaultRole,
        roles: sends ? pendingDefaults.roles : plan.roles,
        userData: plan.userData,
      });
      await deps.webhooks.queue(tx, userCreated(userId, plan.email, false));
      if (sends) {
        const attemptId = await addAttempt(
          deps,
          tx,
          { id: accountId, email: plan.email },
          plan,
          fields.display_name,
        );
        if (plan.passkey) await storeSignupPasskey(deps, tx, accountId, attemptId, plan.passkey);
      } else {
        if (plan.locale) await setAccountLocale(tx, accountId, plan.locale);
        // As its password would: the operator who activates the account activates the registrant's choice.
        if (plan.passkey) await storeSignupPasskey(deps, tx, accountId, null, plan.passkey, plan.client);
      }
      return { user: registrationUser(userId, plan.email, fields) };
    }
    // A taken address gets the answer of a new one, with an id that belongs to no account (a new random
    // uuid each time); its mailbox is told the truth.
    if (sends && existing.email !== null) {
      const account = { id: existing.id, email: existing.email };
      if (existing.active) {
        await sendAccountExists(deps, tx, { ...account, locale: plan.locale, redirectTo: plan.redirectTo });
      } else {
        const attemptId = await addAttempt(deps, tx, account, plan, fields.display_name);
        if (plan.passkey) await storeSignupPasskey(deps, tx, account.id, attemptId, plan.passkey);
      }
    }
    return { user: registrationUser(randomUUID(), plan.email, fields) };
  });
}

/** The longest life of a registration link, in milliseconds. */
function longestLinkMs(deps: AuthDeps): number {
  const c = deps.config;
  return Math.max(ticketLifetimeMinutes(c, 'activation'), ticketLifetimeMinutes(c, 'magic-link')) * 60_000;
}

/**
 * Records an attempt for the pending account and emails its link. Earlier attempts' links stay valid
 * (whichever the owner follows activates the account), but from now on none of them keeps its choices.
 */
async function addAttempt(
  deps: AuthDeps,
  tx: Queryable,
  account: { id: string; email: string },
  plan: Plan,
  displayName: string | null,
): Promise<string> {
  const now = deps.clock.now();
  const purpose = plan.passwordless ? 'magic-link' : 'activation';
  await purgeStaleAttempts(tx, account.id, new Date(now.getTime() - longestLinkMs(deps)));
  const others = await attemptsLiveSince(tx, account.id, now);
  const attemptId = randomUUID();
  await insertAttempt(tx, {
    id: attemptId,
    accountId: account.id,
    kind: plan.passkey ? 'passkey' : plan.passwordless ? 'passwordless' : 'password',
    passwordHash: plan.passwordHash,
    defaultRole: plan.defaultRole,
    roles: plan.roles,
    userData: plan.userData,
    locale: plan.locale ?? null,
    createdAt: now,
    expiresAt: new Date(now.getTime() + ticketLifetimeMinutes(deps.config, purpose) * 60_000),
  });
  const link = {
    accountId: account.id,
    email: account.email,
    displayName: displayName ?? account.email,
    redirectTo: plan.redirectTo,
    attemptId,
    locale: plan.locale ?? (await accountLocale(tx, account.id)),
    keepsChoices: others === 0,
    keepEarlier: true,
  };
  if (plan.passwordless) await issueMagicLink(deps, tx, { ...link, action: 'register' });
  else await issueActivation(deps, tx, link);
  return attemptId;
}

/**
 * POST /auth/activate/resend for a pending account (locked by the caller): a fresh link that replaces
 * the earlier ones. It is itself an attempt that chose nothing, so it never keeps a password or a choice:
 * whoever asked for it may not be whoever registered, and the owner cannot tell the links apart.
 */
export async function resendRegistration(
  deps: AuthDeps,
  tx: Queryable,
  account: AccountRow & { email: string },
  redirectTo: string | undefined,
): Promise<void> {
  const now = deps.clock.now();
  const newest = await newestAttempt(tx, account.id);
  // A magic register link when the latest registration was password-less (accounts from before
  // attempts: when the account has no password), else an activation link.
  const passwordless =
    deps.config.MAGIC_LINK_ENABLED &&
    (newest ? newest.kind === 'passwordless' : account.password_hash === null);
  const purpose = passwordless ? 'magic-link' : 'activation';
  await retireTickets(tx, now, account.id, 'activation');
  await retireTickets(tx, now, account.id, 'magic-link');
  await purgeStaleAttempts(tx, account.id, new Date(now.getTime() - longestLinkMs(deps)));
  const attemptId = randomUUID();
  await insertAttempt(tx, {
    id: attemptId,
    accountId: account.id,
    kind: 'resend',
    passwordHash: null,
    defaultRole: null,
    roles: null,
    userData: null,
    locale: null,
    createdAt: now,
    expiresAt: new Date(now.getTime() + ticketLifetimeMinutes(deps.config, purpose) * 60_000),
  });
  const link = {
    accountId: account.id,
    email: account.email,
    // Nobody's chosen name: the resend may come from someone else than the registrant.
    displayName: account.email,
    redirectTo,
    attemptId,
    locale: newest?.locale ?? (await accountLocale(tx, account.id)),
    keepsChoices: false,
  };
  if (passwordless) await issueMagicLink(deps, tx, { ...link, action: 'register' });
  else await issueActivation(deps, tx, link);
}

/**
 * GET /auth/activate: uses up an 'activation' ticket, activates its account (see completeRegistration)
 * and opens its first session; undefined when the ticket is not valid. `redirectTo` is the checked
 * `redirect_to` given at registration, if any.
 */
export async function activateWithTicket(
  deps: AuthDeps,
  ticket: string,
  client?: EventClient,
): Promise<{ session: Session; redirectTo?: string } | undefined> {
  return deps.db.transaction(async (tx) => {
    const used = await consumeTicket(tx, deps.clock.now(), ticket, 'activation');
    if (!used) return undefined;
    if (!(await completeRegistration(deps, tx, used, 'activation'))) return undefined;
    const redirectTo = typeof used.payload.redirect_to === 'string' ? used.payload.redirect_to : undefined;
    return {
      session: await issueSession(deps, used.accountId, { db: tx, method: 'magic-link', client }),
      redirectTo,
    };
  });
}

/**
 * Activates the pending account of a followed registration link (activation or magic register link;
 * the ticket is already used up), or of a provider that vouched for its address (`used` then names no
 * attempt and no address), and records what proved the address (`by`). The account gets the choices of
 * the link's own attempt only when no other attempt's link was live while this one was (or sent after
 * it); otherwise, for a resent link, a provider, and links issued before attempts existed, it gets the
 * defaults: no password, DEFAULT_USER_ROLE and DEFAULT_ALLOWED_USER_ROLES, display name = the email,
 * REGISTRATION_CUSTOM_FIELDS at their column defaults, no locale. Whatever else an unproven registrant
 * could have left on the row goes too (a second factor, sessions: none can exist on a pending account
 * made here, but an imported or operator-edited row may carry them). Every other registration link of
 * the account stops working. False when the account is not pending any more.
 */
export async function completeRegistration(
  deps: AuthDeps,
  tx: Queryable,
  used: ConsumedTicket,
  by: ProofMethod,
): Promise<boolean> {
  if (!(await activateAccount(tx, used.accountId))) return false;
  const account = (await findAccountById(tx, used.accountId)) as AccountRow;
  await deps.webhooks.queue(tx, {
    type: 'user.activated',
    userId: account.user_id,
    data: { email: account.email },
  });
  const attemptId = used.payload.attempt_id;
  const attempt = typeof attemptId === 'string' ? await findAttempt(tx, account.id, attemptId) : undefined;
  const alone =
    attempt !== undefined &&
    attempt.kind !== 'resend' &&
    (await attemptsLiveSince(tx, account.id, attempt.created_at, attempt.id)) === 0;
  // An account an operator made (and nobody has tried to register since) keeps what the operator set:
  // there is no stranger's choice on it to drop. Otherwise the attempt's choices, or the defaults.
  const chose = attempt !== undefined && attempt.kind !== 'resend';
  if (chose || !(await operatorMadeUntouched(tx, account.id)))
    await grantChoices(deps, tx, account, alone ? attempt : undefined);
  // The passkey of the attempt whose link alone activated the account becomes its own; every other
  // passkey the waiting account held goes (before the attempts, which would take theirs with them).
  const adopted = await settlePendingPasskeys(tx, account.id, alone ? attempt.id : undefined);
  if (adopted)
    await recordEvent(deps, tx, {
      type: 'passkey_added',
      details: { passkey: adopted.id, name: adopted.name },
      accountId: account.id,
    });
  await deleteAttempts(tx, account.id);
  const now = deps.clock.now();
  await deactivateMfa(tx, account.id, now);
  await deleteAccountSessions(tx, account.id);
  if (by.startsWith('provider:') && account.email !== null)
    await markEmailProven(tx, account.id, account.email, { by, at: now });
  else await proveMailedAddress(deps, tx, used, by);
  await retireTickets(tx, now, account.id, 'activation');
  await retireTickets(tx, now, account.id, 'magic-link');
  return true;
}

/** Writes the attempt's choices on the account, or the defaults when there is no attempt to keep. */
async function grantChoices(
  deps: AuthDeps,
  tx: Queryable,
  account: AccountRow,
  attempt: AttemptRow | undefined,
): Promise<void> {
  const c = deps.config;
  let roles = chooseRoles(deps, undefined);
  if (attempt?.roles && attempt.default_role) {
    try {
      // Checked again: the role settings may have changed since the registration.
      roles = chooseRoles(deps, { allowed_roles: attempt.roles, default_role: attempt.default_role });
    } catch {
      // No longer allowed: the defaults.
    }
  }
  await setAccountCredentials(tx, account.id, {
    passwordHash: attempt?.password_hash ?? null,
    defaultRole: roles.defaultRole,
    roles: roles.roles,
  });
  // Registration fields the attempt did not set go back to their defaults; a NOT NULL column without a
  // default has none to go back to and keeps the first registration's value.
  const reset = await resettableUserColumns(tx, [
    ...new Set(['display_name', ...c.REGISTRATION_CUSTOM_FIELDS]),
  ]);
  await setUserFields(tx, account.user_id, attempt?.user_data ?? { display_name: account.email }, reset);
  if (attempt?.locale) await setAccountLocale(tx, account.id, attempt.locale);
  else await clearAccountLocale(tx, account.id);
}

/**
 * POST /auth/activate/resend: a new link for an account that is still waiting for activation (an
 * activation link, or a magic register link after a password-less registration). The request is recorded
 * as a deferred step of the email outbox and the lookup runs after the response, so the answer is the
 * same, in status and in time, whether or not the address has such an account.
 */
export async function resendActivation(
  deps: Pick<AuthDeps, 'db' | 'mailer'>,
  input: { email: string; redirectTo?: string },
): Promise<void> {
  await deps.mailer.sendLater(deps.db, 'activation-resend', input);
}

/** The deferred step of a resend: a new link for an account still waiting for activation, else nothing. */
export async function activationResendStep(
  deps: AuthDeps,
  tx: Queryable,
  input: DeferredInput,
): Promise<void> {
  // Under lock: an activation or a registration of the same account waits for this one.
  const account = await lockAccountByEmail(tx, input.email);
  if (!account || account.active || account.is_anonymous || account.email === null) return;
  await resendRegistration(deps, tx, { ...account, email: account.email }, input.redirectTo);
}
