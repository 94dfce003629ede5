/**
 * What an operator does to accounts (`gatehouse users …`): create one, block and unblock it, set its
 * roles, hand out a password-reset link for support. Built on the same store and flows as the routes;
 * the operator is trusted, so the self-service limits (allowed email domains, ALLOWED_USER_ROLES) do not
 * apply, but the database's (known roles, a proper address) and the password rules do.
 */
import type { Database, Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/record.ts';
import { userCreated } from '../webhooks/webhooks.ts';
import {
  type AccountRow,
  accountRoles,
  findAccountByEmail,
  findAccountById,
  findAccountByUserId,
  insertAccount,
  setAccountDisabled,
  setAccountRoles,
  unknownRoles,
} from './accounts-store.ts';
import type { AuthDeps } from './deps.ts';
import { issueResetLink } from './flows/password-reset.ts';
import { checkBreached } from './passwords.ts';
import { revoke } from './revocations.ts';
import { deleteAccountSessions, listAccountSessions, type SessionRow } from './sessions-store.ts';
import { retireTickets } from './tickets-store.ts';

export type OperatorDeps = Pick<AuthDeps, 'config' | 'db' | 'clock'> & Partial<Pick<AuthDeps, 'webhooks'>>;

/** A refusal worded for the operator (the command prints its message and exits 1). */
export class OperatorError extends Error {
  override name = 'OperatorError';
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The CHECK of auth.accounts.email (migration 0001), tested first for a clearer message. */
const PROPER_EMAIL = /^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$/;

/** The account named by an email, a user id (`x-hasura-user-id`) or an account id. */
export async function findAccount(db: Database, ref: string): Promise<AccountRow> {
  const found = UUID.test(ref)
    ? ((await findAccountByUserId(db, ref)) ?? (await findAccountById(db, ref)))
    : await findAccountByEmail(db, ref);
  if (!found) throw new OperatorError(`no account has the ${UUID.test(ref) ? 'id' : 'email'} "${ref}"`);
  return found;
}

/** The roles as given, the default role added when missing; refused when auth.roles lacks one. */
async function checkedRoles(db: Queryable, defaultRole: string, roles: readonly string[]): Promise<string[]> {
  const all = [...new Set(roles.includes(defaultRole) ? roles : [...roles, defaultRole])];
  const unknown = await unknownRoles(db, all);
  if (unknown.length > 0)
    throw new OperatorError(
      `unknown role${unknown.length > 1 ? 's' : ''} ${unknown.map((r) => `"${r}"`).join(', ')}: auth.roles holds the roles accounts may have (add them to ALLOWED_USER_ROLES, which the service and these commands insert there)`,
    );
  return all;
}

/** Checks a new password as the password routes do (length, breach check when configured). */
export async function checkNewPassword(deps: Pick<AuthDeps, 'config'>, password: string): Promise<void> {
  const min = deps.config.MIN_PASSWORD_LENGTH;
  if (password.length < min || password.length > 128)
    throw new OperatorError(`the password must be ${min} to 128 characters long`);
  try {
    await checkBreached(deps.config, password);
  } catch (err) {
    if (err instanceof AppError) throw new OperatorError(err.message);
    throw err;
  }
}

export interface NewUser {
  email: string;
  /** An argon2 hash made by the caller (Passwords.hash), or null for an account without a password. */
  passwordHash: string | null;
  defaultRole?: string;
  roles?: readonly string[];
  /** Active at once; otherwise it waits, like a registration without emails, for `users enable`. */
  active: boolean;
}

export async function createUser(
  deps: OperatorDeps,
  input: NewUser,
): Promise<{ accountId: string; userId: string; defaultRole: string; roles: string[] }> {
  if (!PROPER_EMAIL.test(input.email)) throw new OperatorError(`"${input.email}" is not an email address`);
  const defaultRole = input.defaultRole ?? deps.config.DEFAULT_USER_ROLE;
  const roles = await checkedRoles(
    deps.db,
    defaultRole,
    input.roles ?? deps.config.DEFAULT_ALLOWED_USER_ROLES,
  );
  try {
    const ids = await deps.db.transaction(async (tx) => {
      const made = await insertAccount(tx, {
        email: input.email,
        passwordHash: input.passwordHash,
        active: input.active,
        isAnonymous: false,
        defaultRole,
        roles,
        userData: { display_name: input.email },
        // The operator names the address of the person they make the account for: it counts as proven
        // (provider sign-in with it links here). `users enable` of someone's registration does not.
        emailProof: { by: 'operator', at: deps.clock.now() },
      });
      await deps.webhooks?.queue(tx, userCreated(made.userId, input.email, input.active));
      return made;
    });
    return { ...ids, defaultRole, roles };
  } catch (err) {
    if (err instanceof AppError && err.code === 'ACCOUNT_EXISTS')
      throw new OperatorError(`an account with the email "${input.email}" exists already`);
    throw err;
  }
}

/**
 * Blocks an account: no sign-in of any kind and no refresh from now on (sessions.ts), its refresh tokens
 * revoked and its open links (reset, magic link, activation, MFA step) retired, in one transaction.
 * Every access token of the account issued until now is refused by every instance within a second
 * (revocations.ts). Returns the number of sign-ins ended.
 */
export async function disableUser(deps: OperatorDeps, account: AccountRow): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    await setAccountDisabled(tx, account.id, now);
    await retireTickets(tx, now, account.id);
    const ended = await deleteAccountSessions(tx, account.id);
    await revoke(deps, tx, { sessionIds: ended, userId: account.user_id });
    await recordEvent(deps, tx, {
      type: 'account_disabled',
      accountId: account.id,
      details: { by: 'operator' },
    });
    if (ended.length > 0)
      await recordEvent(deps, tx, {
        type: 'session_ended',
        accountId: account.id,
        details: { reason: 'account_disabled', sessions: ended },
      });
    return ended.length;
  });
}

/**
 * Signs an account out everywhere at once (`gatehouse users sign-out`): every session ends and its access
 * tokens are refused by every instance within a second. Returns the number of sessions ended.
 */
export async function signOutUser(deps: OperatorDeps, account: AccountRow): Promise<number> {
  return deps.db.transaction(async (tx) => {
    const ended = await deleteAccountSessions(tx, account.id);
    await revoke(deps, tx, { sessionIds: ended });
    if (ended.length > 0)
      await recordEvent(deps, tx, {
        type: 'session_ended',
        accountId: account.id,
        details: { reason: 'operator', sessions: ended },
      });
    return ended.length;
  });
}

/** The account's live sessions, newest first (`gatehouse users sessions`). */
export async function userSessions(deps: OperatorDeps, account: AccountRow): Promise<SessionRow[]> {
  return listAccountSessions(deps.db, account.id, deps.clock.now());
}

/** Lifts a block; an account still waiting for activation is activated (the operator vouches for it). */
export async function enableUser(deps: OperatorDeps, account: AccountRow): Promise<void> {
  await deps.db.transaction(async (tx) => {
    await setAccountDisabled(tx, account.id, null);
    await deps.webhooks?.queue(tx, {
      type: 'user.updated',
      userId: account.user_id,
      data: { changes: ['disabled'], disabled: false },
    });
  });
}

/**
 * Sets the default role and, when given, the roles (else the current ones, plus the default role).
 * Tokens already issued keep their claims; the next refresh carries the new ones.
 */
export async function setUserRoles(
  deps: OperatorDeps,
  account: AccountRow,
  input: { defaultRole: string; roles?: readonly string[] },
): Promise<{ defaultRole: string; roles: string[] }> {
  return deps.db.transaction(async (tx) => {
    const current = input.roles ?? (await accountRoles(tx, account.id));
    const roles = await checkedRoles(tx, input.defaultRole, current);
    await setAccountRoles(tx, account.id, { defaultRole: input.defaultRole, roles });
    await deps.webhooks?.queue(tx, {
      type: 'user.updated',
      userId: account.user_id,
      data: { changes: ['roles'], roles, default_role: input.defaultRole },
    });
    return { defaultRole: input.defaultRole, roles };
  });
}

/**
 * A password-reset link for support: a real single-use ticket, exactly the lost-password email's
 * (earlier reset links of the account stop working). Only for an active, enabled account with an
 * address, as the emailed flow.
 */
export async function resetLink(
  deps: OperatorDeps,
  account: AccountRow,
): Promise<{ link: string; expiresAt: Date }> {
  if (!deps.config.LOST_PASSWORD_ENABLED)
    throw new OperatorError(
      'LOST_PASSWORD_ENABLED is false: the service would refuse the link (POST /auth/change-password/change answers 404)',
    );
  if (!account.active)
    throw new OperatorError(
      `${account.email} has not been activated: its owner follows the activation link, or gatehouse users enable activates it`,
    );
  if (account.disabled)
    throw new OperatorError(`${account.email} is disabled: gatehouse users enable it first`);
  return deps.db.transaction((tx) => issueResetLink(deps, tx, account.id));
}
