/**
 * What an operator does to accounts: find and list them, create one, change its roles, address or state,
 * block and unblock it, end its sessions, delete it, hand out a link. One set of functions behind both
 * `gatehouse users …` (cli/commands/users.ts) and the admin API (admin/routes), built on the same store
 * and flows as the self-service routes. The operator is trusted, so the self-service limits (allowed
 * email domains, ALLOWED_USER_ROLES) do not apply, but the database's (known roles, a proper address) and
 * the password rules do. Refusals are AppErrors of the catalogue: the API answers them, the CLI prints
 * their message.
 */
import type { Database, Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/record.ts';
import type { AccountEventBody, OperatorRef } from '../events/types.ts';
import { serviceLink } from '../mail/links.ts';
import { userCreated } from '../webhooks/webhooks.ts';
import {
  type AccountListing,
  type AccountRow,
  accountRoles,
  deleteUser,
  emailTaken,
  findAccountByEmail,
  findAccountById,
  findAccountByUserId,
  findListingByUserId,
  insertAccount,
  type ListingKey,
  listAccountsPage,
  loadProfile,
  setAccountDisabled,
  setAccountRoles,
  setEmail,
  setEmailProof,
  setUserFields,
  unknownRoles,
} from './accounts-store.ts';
import type { AuthDeps } from './deps.ts';
import { issueActivation, issueMagicLink } from './flows/link-emails.ts';
import { issueResetLink, mailResetLink } from './flows/password-reset.ts';
import { accountLinks } from './oauth/links-store.ts';
import { checkBreached } from './passwords.ts';
import { revoke } from './revocations.ts';
import { deleteAccountSessions, listAccountSessions, type SessionRow } from './sessions-store.ts';
import { issueTicket, retireTickets } from './tickets-store.ts';

/**
 * The settings, the database and the time; the instance's revoked list (so its own requests refuse an
 * ended session at once, not only after the notification comes back), the mailer (links sent by email)
 * and the password hashing threads (a new password) where the caller has them: the CLI has none of the
 * first two, and the functions that need one say so.
 */
export type OperatorDeps = Pick<AuthDeps, 'config' | 'db' | 'clock'> &
  Partial<Pick<AuthDeps, 'revocations' | 'mailer' | 'passwords' | 'webhooks'>>;

/**
 * Who made a change: the admin secret, an access token with ADMIN_ROLE (its user id), or the `gatehouse`
 * command at the machine (whoever may open the service's database).
 */
export type Operator = { via: 'admin-secret' } | { via: 'admin-role'; userId: string } | { via: 'cli' };

const CLI: Operator = { via: 'cli' };

/** The operator as the security feed names them (no address: the admin-role user by id). */
function ref(by: Operator): OperatorRef {
  return by.via === 'admin-role' ? { via: 'admin-role', user_id: by.userId } : { via: by.via };
}

/**
 * Records an operator's change in the account's security feed (events/), in the change's transaction.
 * No client: the operator's address is not the account holder's business.
 */
async function note(
  deps: OperatorDeps,
  tx: Queryable,
  accountId: string,
  event: AccountEventBody,
): Promise<void> {
  await recordEvent(deps, tx, { ...event, accountId });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The CHECK of auth.accounts.email (migration 0001), tested first for a clearer message. */
const PROPER_EMAIL = /^[A-Za-z0-9._+%-]+@[A-Za-z0-9.-]+[.][A-Za-z]+$/;

function assertProperEmail(email: string): void {
  if (!PROPER_EMAIL.test(email) || email.length > 254)
    throw new AppError('VALIDATION', `"${email}" is not an email address`);
}

/** The account named by an email, a user id (`x-hasura-user-id`) or an account id (the CLI's operand). */
export async function findAccount(db: Database, ref: string): Promise<AccountRow> {
  const found = UUID.test(ref)
    ? ((await findAccountByUserId(db, ref)) ?? (await findAccountById(db, ref)))
    : await findAccountByEmail(db, ref);
  if (!found)
    throw new AppError('USER_NOT_FOUND', `no account has the ${UUID.test(ref) ? 'id' : 'email'} "${ref}"`);
  return found;
}

/** The account of a user id (the admin API's `{id}`); 404 USER_NOT_FOUND when there is none. */
export async function accountOfUser(db: Queryable, userId: string): Promise<AccountRow> {
  const found = await findAccountByUserId(db, userId);
  if (!found) throw new AppError('USER_NOT_FOUND');
  return found;
}

/** The roles as given, the default role added when missing; refused when auth.roles lacks one. */
async function checkedRoles(db: Queryable, defaultRole: string, roles: readonly string[]): Promise<string[]> {
  const all = [...new Set(roles.includes(defaultRole) ? roles : [...roles, defaultRole])];
  const unknown = await unknownRoles(db, all);
  if (unknown.length > 0)
    throw new AppError(
      'UNKNOWN_ROLE',
      `unknown role${unknown.length > 1 ? 's' : ''} ${unknown.map((r) => `"${r}"`).join(', ')}: auth.roles holds the roles accounts may have (add them to ALLOWED_USER_ROLES, which the service and these commands insert there)`,
    );
  return all;
}

/** Checks a new password as the password routes do (length, breach check when configured). */
export async function checkNewPassword(deps: Pick<AuthDeps, 'config'>, password: string): Promise<void> {
  const min = deps.config.MIN_PASSWORD_LENGTH;
  if (password.length < min || password.length > 128)
    throw new AppError('VALIDATION', `the password must be ${min} to 128 characters long`);
  await checkBreached(deps.config, password);
}

// --- reading ------------------------------------------------------------------------------------------

/** A page of accounts and the cursor of the next one (null on the last page). */
export interface UserPage {
  users: AccountListing[];
  nextCursor: string | null;
}

/** PostgreSQL's text form of a timestamptz, as `created_at::text` writes it. */
const PG_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?[+-](\d{2})(:\d{2}){0,2}$/;

/**
 * Whether `text` is such a time that PostgreSQL accepts: a real calendar day (JavaScript's Date.parse
 * takes 30 February), hours, minutes and an offset in range, so a forged cursor is a 400, never an error
 * of the database.
 */
function realTime(text: string): boolean {
  const m = PG_TIME.exec(text);
  if (!m) return false;
  const [y, mo, d, h, mi, s, off] = [m[1], m[2], m[3], m[4], m[5], m[6], m[8]].map(Number) as number[];
  const day = new Date(Date.UTC(y as number, (mo as number) - 1, d));
  return (
    (y as number) >= 1 &&
    day.getUTCFullYear() === y &&
    day.getUTCMonth() === (mo as number) - 1 &&
    day.getUTCDate() === d &&
    (h as number) <= 23 &&
    (mi as number) <= 59 &&
    (s as number) <= 59 &&
    (off as number) <= 15
  );
}

function encodeCursor(key: ListingKey): string {
  return Buffer.from(JSON.stringify([key.createdAt, key.id])).toString('base64url');
}

/** The key a cursor carries; 400 for anything this service did not make (never a database error). */
function decodeCursor(cursor: string): ListingKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    Array.isArray(parsed) &&
    parsed.length === 2 &&
    typeof parsed[0] === 'string' &&
    typeof parsed[1] === 'string' &&
    realTime(parsed[0]) &&
    UUID.test(parsed[1])
  )
    return { createdAt: parsed[0], id: parsed[1] };
  throw new AppError('VALIDATION', '"cursor" is not a cursor this service gave (take next_cursor as it is)');
}

/**
 * Accounts, oldest first, `limit` at a time; `email`: those whose address contains it (any case);
 * `cursor`: the `nextCursor` of the previous page.
 */
export async function listUsers(
  deps: Pick<OperatorDeps, 'db'>,
  input: { limit: number; cursor?: string; email?: string },
): Promise<UserPage> {
  const after = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
  // One more than asked: whether there is a next page, without a second query.
  const rows = await listAccountsPage(deps.db, { limit: input.limit + 1, after, email: input.email });
  const users = rows.slice(0, input.limit);
  const last = users[users.length - 1];
  return {
    users,
    nextCursor:
      rows.length > input.limit && last ? encodeCursor({ createdAt: last.created_key, id: last.id }) : null,
  };
}

/** One account as an operator sees it: the listing, its provider identities and its live sessions. */
export interface UserDetails {
  user: AccountListing;
  providers: { provider: string; subject: string }[];
  sessions: SessionRow[];
}

export async function userDetails(deps: OperatorDeps, userId: string): Promise<UserDetails> {
  const user = await findListingByUserId(deps.db, userId);
  if (!user) throw new AppError('USER_NOT_FOUND');
  const [links, sessions] = await Promise.all([
    accountLinks(deps.db, user.id),
    listAccountSessions(deps.db, user.id, deps.clock.now()),
  ]);
  return { user, providers: links.map((l) => ({ provider: l.provider, subject: l.subject })), sessions };
}

/** The account's live sessions, newest first (`gatehouse users sessions`, the admin API). */
export async function userSessions(deps: OperatorDeps, account: AccountRow): Promise<SessionRow[]> {
  return listAccountSessions(deps.db, account.id, deps.clock.now());
}

// --- creating -----------------------------------------------------------------------------------------

export interface NewUser {
  email: string;
  /** Its password (checked as the routes check one, hashed by `deps.passwords`), or none. */
  password?: string;
  defaultRole?: string;
  roles?: readonly string[];
  /** public.users.display_name; the address when not given (as a registration). */
  displayName?: string;
  /** Active at once; otherwise it waits, like a registration without emails, for activation. */
  active: boolean;
  /** Emails the account an activation link (it must be left waiting for one: `active` false). */
  sendInvite?: boolean;
}

export async function createUser(
  deps: OperatorDeps,
  input: NewUser,
  by: Operator = CLI,
): Promise<{ accountId: string; userId: string; defaultRole: string; roles: string[] }> {
  assertProperEmail(input.email);
  if (input.sendInvite && input.active)
    throw new AppError(
      'VALIDATION',
      'an invitation is an activation link: leave "active" out (or false) with "send_invite"',
    );
  if (input.sendInvite) requireMailer(deps);
  let passwordHash: string | null = null;
  if (input.password !== undefined) {
    await checkNewPassword(deps, input.password);
    if (!deps.passwords) throw new Error('createUser with a password needs the password hashing threads');
    passwordHash = await deps.passwords.hash(input.password);
  }
  const defaultRole = input.defaultRole ?? deps.config.DEFAULT_USER_ROLE;
  const roles = await checkedRoles(
    deps.db,
    defaultRole,
    input.roles ?? deps.config.DEFAULT_ALLOWED_USER_ROLES,
  );
  const email = input.email;
  try {
    const ids = await deps.db.transaction(async (tx) => {
      const made = await insertAccount(tx, {
        email,
        passwordHash,
        active: input.active,
        isAnonymous: false,
        defaultRole,
        roles,
        userData: { display_name: input.displayName ?? email },
        // The operator names the address of the person they make the account for: it counts as proven
        // (provider sign-in with it links here). `users enable` of someone's registration does not.
        emailProof: { by: 'operator', at: deps.clock.now() },
      });
      if (input.sendInvite)
        await issueActivation({ ...deps, mailer: requireMailer(deps) }, tx, {
          accountId: made.accountId,
          email,
          displayName: input.displayName ?? email,
        });
      await deps.webhooks?.queue(tx, userCreated(made.userId, email, input.active));
      await note(deps, tx, made.accountId, {
        type: 'admin_user_created',
        details: { by: ref(by), active: input.active, invited: input.sendInvite === true },
      });
      return made;
    });
    return { ...ids, defaultRole, roles };
  } catch (err) {
    if (err instanceof AppError && err.code === 'ACCOUNT_EXISTS')
      throw new AppError('ACCOUNT_EXISTS', `an account with the email "${email}" exists already`);
    throw err;
  }
}

// --- changing -----------------------------------------------------------------------------------------

/**
 * Ends every session of the account in `tx` and refuses their access tokens on every instance within a
 * second (revocations.ts); with `userId`, every access token of the user issued until now too.
 */
async function endSessions(
  deps: OperatorDeps,
  tx: Queryable,
  account: AccountRow,
  opts: { wholeUser?: boolean } = {},
): Promise<string[]> {
  const ended = await deleteAccountSessions(tx, account.id);
  await revoke(deps, tx, { sessionIds: ended, userId: opts.wholeUser ? account.user_id : undefined });
  return ended;
}

/**
 * Blocks an account: no sign-in of any kind and no refresh from now on (sessions.ts), its refresh tokens
 * revoked and its open links (reset, magic link, activation, MFA step) retired, in one transaction.
 * Every access token of the account issued until now is refused by every instance within a second
 * (revocations.ts). Returns the number of sign-ins ended.
 */
export async function disableUser(
  deps: OperatorDeps,
  account: AccountRow,
  by: Operator = CLI,
): Promise<number> {
  return deps.db.transaction((tx) => disableIn(deps, tx, account, by));
}

async function disableIn(
  deps: OperatorDeps,
  tx: Queryable,
  account: AccountRow,
  by: Operator,
): Promise<number> {
  const now = deps.clock.now();
  await setAccountDisabled(tx, account.id, now);
  await retireTickets(tx, now, account.id);
  const sessions = await endSessions(deps, tx, account, { wholeUser: true });
  // The feed's own type (what happened), then the operator's record (who did it, with what).
  await recordEvent(deps, tx, {
    type: 'account_disabled',
    accountId: account.id,
    details: { by: 'operator' },
  });
  await note(deps, tx, account.id, { type: 'admin_account_disabled', details: { by: ref(by), sessions } });
  return sessions.length;
}

async function enableIn(deps: OperatorDeps, tx: Queryable, account: AccountRow, by: Operator): Promise<void> {
  await setAccountDisabled(tx, account.id, null);
  await note(deps, tx, account.id, { type: 'admin_account_enabled', details: { by: ref(by) } });
  await deps.webhooks?.queue(tx, {
    type: 'user.updated',
    userId: account.user_id,
    data: { changes: ['disabled'], disabled: false },
  });
}

/** Lifts a block; an account still waiting for activation is activated (the operator vouches for it). */
export async function enableUser(deps: OperatorDeps, account: AccountRow, by: Operator = CLI): Promise<void> {
  await deps.db.transaction((tx) => enableIn(deps, tx, account, by));
}

/**
 * Signs an account out everywhere at once: every session ends and its access tokens are refused by every
 * instance within a second. Returns the number of sessions ended.
 */
export async function signOutUser(
  deps: OperatorDeps,
  account: AccountRow,
  by: Operator = CLI,
): Promise<number> {
  return deps.db.transaction(async (tx) => {
    const sessions = await endSessions(deps, tx, account);
    if (sessions.length > 0)
      await recordEvent(deps, tx, {
        type: 'session_ended',
        accountId: account.id,
        details: { reason: 'operator', sessions },
      });
    await note(deps, tx, account.id, { type: 'admin_signed_out', details: { by: ref(by), sessions } });
    return sessions.length;
  });
}

/**
 * Sets the roles in `tx`: the default role and, when given, the roles (else the current ones, plus the
 * default role). Adding a role reaches the account's tokens at their next refresh; taking one away (or
 * changing the default role) ends its sessions, so that no access token keeps a role it lost (an admin
 * role above all) until it expires.
 */
async function setRolesIn(
  deps: OperatorDeps,
  tx: Queryable,
  account: AccountRow,
  input: { defaultRole: string; roles?: readonly string[] },
  by: Operator,
): Promise<{ defaultRole: string; roles: string[]; sessionsEnded: number }> {
  const before = await accountRoles(tx, account.id);
  const roles = await checkedRoles(tx, input.defaultRole, input.roles ?? before);
  await setAccountRoles(tx, account.id, { defaultRole: input.defaultRole, roles });
  const lost = before.some((r) => !roles.includes(r)) || input.defaultRole !== account.default_role;
  const sessions = lost ? await endSessions(deps, tx, account) : [];
  await note(deps, tx, account.id, {
    type: 'admin_roles_changed',
    details: { by: ref(by), roles, default_role: input.defaultRole, sessions },
  });
  await deps.webhooks?.queue(tx, {
    type: 'user.updated',
    userId: account.user_id,
    data: { changes: ['roles'], roles, default_role: input.defaultRole },
  });
  return { defaultRole: input.defaultRole, roles, sessionsEnded: sessions.length };
}

/** `gatehouse users set-role`: see setRolesIn. */
export async function setUserRoles(
  deps: OperatorDeps,
  account: AccountRow,
  input: { defaultRole: string; roles?: readonly string[] },
  by: Operator = CLI,
): Promise<{ defaultRole: string; roles: string[]; sessionsEnded: number }> {
  return deps.db.transaction((tx) => setRolesIn(deps, tx, account, input, by));
}

/** What `PATCH /admin/users/{id}` may change; absent fields stay as they are. */
export interface UserChanges {
  roles?: readonly string[];
  defaultRole?: string;
  disabled?: boolean;
  email?: string;
  emailVerified?: boolean;
  displayName?: string;
}

/**
 * Applies `changes` in one transaction (all or nothing): roles (setRolesIn), block or unblock (as
 * disableUser / enableUser), a new address (in force at once, its proof forgotten unless
 * `emailVerified`; the account's open links, mailed to the old one, stop working), the proof of the
 * address, the display name. Returns the account as it is now.
 */
export async function updateUser(
  deps: OperatorDeps,
  account: AccountRow,
  changes: UserChanges,
  by: Operator = CLI,
): Promise<AccountListing> {
  const now = deps.clock.now();
  if (changes.email !== undefined) assertProperEmail(changes.email);
  await deps.db.transaction(async (tx) => {
    if (changes.roles !== undefined || changes.defaultRole !== undefined)
      await setRolesIn(
        deps,
        tx,
        account,
        { defaultRole: changes.defaultRole ?? account.default_role, roles: changes.roles },
        by,
      );
    if (changes.email !== undefined && changes.email.toLowerCase() !== account.email?.toLowerCase()) {
      if (await emailTaken(tx, changes.email, account.id))
        throw new AppError('ACCOUNT_EXISTS', `an account with the email "${changes.email}" exists already`);
      await setEmail(tx, account.id, changes.email);
      await retireTickets(tx, now, account.id);
      await note(deps, tx, account.id, {
        type: 'admin_email_changed',
        details: { by: ref(by), verified: changes.emailVerified === true },
      });
    }
    if (changes.emailVerified !== undefined) {
      await setEmailProof(tx, account.id, changes.emailVerified ? { by: 'operator', at: now } : null);
      if (changes.email === undefined)
        await note(deps, tx, account.id, {
          type: 'admin_email_verification_changed',
          details: { by: ref(by), verified: changes.emailVerified },
        });
    }
    if (changes.displayName !== undefined) {
      await setUserFields(tx, account.user_id, { display_name: changes.displayName }, []);
      await note(deps, tx, account.id, {
        type: 'admin_profile_changed',
        details: { by: ref(by), fields: ['display_name'] },
      });
    }
    if (changes.disabled === true && !account.disabled) await disableIn(deps, tx, account, by);
    if (changes.disabled === false && account.disabled) await enableIn(deps, tx, account, by);
  });
  const now_ = await findListingByUserId(deps.db, account.user_id);
  if (!now_) throw new AppError('USER_NOT_FOUND');
  return now_;
}

/**
 * Deletes the account's public.users row; the account, roles, sessions, tickets and security feed
 * cascade with it (so no event records it there: the caller logs it), and every access token of the
 * user is refused from now on (as a self-deletion).
 */
export async function deleteUserAccount(deps: OperatorDeps, account: AccountRow): Promise<void> {
  await deps.db.transaction(async (tx) => {
    if (!(await deleteUser(tx, account.user_id))) throw new AppError('USER_NOT_FOUND');
    await revoke(deps, tx, { userId: account.user_id });
  });
}

// --- links --------------------------------------------------------------------------------------------

export type LinkType = 'password-reset' | 'magic-link' | 'activation';

function requireMailer(deps: OperatorDeps): NonNullable<OperatorDeps['mailer']> {
  if (!deps.mailer?.sends) throw new AppError('EMAILS_DISABLED');
  return deps.mailer;
}

function unavailable(message: string): AppError {
  return new AppError('LINK_NOT_AVAILABLE', message);
}

/** Why `account` cannot use a link of `type`, or undefined when it can. */
function linkRefusal(deps: OperatorDeps, account: AccountRow, type: LinkType): string | undefined {
  const who = account.email ?? account.user_id;
  if (account.email === null) return `${who} has no email address`;
  if (account.disabled)
    return `${who} is disabled: enable it first (gatehouse users enable, or PATCH /admin/users/{id} with "disabled": false)`;
  if (type === 'activation')
    return account.active ? `${who} is active already: it needs no activation link` : undefined;
  if (!account.active)
    return `${who} has not been activated: its owner follows the activation link, or an operator enables it`;
  if (type === 'password-reset' && !deps.config.LOST_PASSWORD_ENABLED)
    return 'LOST_PASSWORD_ENABLED is false: the service would refuse the link (POST /auth/change-password/change answers 404)';
  if (type === 'magic-link' && !deps.config.MAGIC_LINK_ENABLED)
    return 'MAGIC_LINK_ENABLED is false: the service would refuse the link (GET /auth/magic-link answers 404)';
  return undefined;
}

/**
 * A link of `type` for the account, for support: a real single-use ticket, as the flow's email carries
 * (earlier links of that kind stop working). With `send`, emailed to the account's address as the flow
 * emails it (and returned too); without, only returned, for the operator to hand over: such a link was
 * not mailed, so following it proves nothing about the address.
 */
export async function userLink(
  deps: OperatorDeps,
  account: AccountRow,
  input: { type: LinkType; send?: boolean },
  by: Operator = CLI,
): Promise<{ link: string; expiresAt: Date }> {
  const refusal = linkRefusal(deps, account, input.type);
  if (refusal) throw unavailable(refusal);
  const mailer = input.send ? requireMailer(deps) : undefined;
  return deps.db.transaction(async (tx) => {
    await note(deps, tx, account.id, {
      type: 'admin_link_issued',
      details: { by: ref(by), link: input.type, sent: mailer !== undefined },
    });
    return issueLink(deps, tx, account, input.type, mailer);
  });
}

/** Issues (and, with `mailer`, emails) the link of userLink in `tx`. */
async function issueLink(
  deps: OperatorDeps,
  tx: Queryable,
  account: AccountRow,
  type: LinkType,
  mailer: NonNullable<OperatorDeps['mailer']> | undefined,
): Promise<{ link: string; expiresAt: Date }> {
  const email = account.email as string;
  if (type === 'password-reset') {
    if (mailer) return mailResetLink({ ...deps, mailer }, tx, { id: account.id, email });
    return issueResetLink(deps, tx, account.id);
  }
  const displayName = (await loadProfile(tx, account.id))?.user.display_name ?? email;
  if (type === 'magic-link') {
    if (mailer)
      return issueMagicLink({ ...deps, mailer }, tx, {
        accountId: account.id,
        email,
        displayName,
        action: 'log-in',
      });
    const { ticket, expiresAt } = await issueTicket(tx, deps.config, deps.clock.now(), {
      accountId: account.id,
      purpose: 'magic-link',
      payload: { action: 'log-in' },
    });
    return {
      link: serviceLink(deps.config, '/auth/magic-link', { action: 'log-in', token: ticket }),
      expiresAt,
    };
  }
  if (mailer) {
    const sent = await issueActivation({ ...deps, mailer }, tx, {
      accountId: account.id,
      email,
      displayName,
    });
    if (sent) return sent;
  }
  const { ticket, expiresAt } = await issueTicket(tx, deps.config, deps.clock.now(), {
    accountId: account.id,
    purpose: 'activation',
  });
  return { link: serviceLink(deps.config, '/auth/activate', { ticket }), expiresAt };
}

/** `gatehouse users reset-link`: a password-reset link printed for support (userLink, not sent). */
export async function resetLink(
  deps: OperatorDeps,
  account: AccountRow,
  by: Operator = CLI,
): Promise<{ link: string; expiresAt: Date }> {
  return userLink(deps, account, { type: 'password-reset' }, by);
}
