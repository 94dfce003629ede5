/**
 * Account life cycle: password change, self-deletion, and the checks the flows share. Route handlers
 * call one function here each; sign-in is in sign-in.ts, registration and activation in
 * flows/registration.ts.
 */
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/record.ts';
import { type AccountRow, deleteUser, findAccountByUserId, setPasswordHash } from './accounts-store.ts';
import type { SessionDeps } from './deps.ts';
import { checkBreached } from './passwords.ts';
import { assertReauthenticated, type Reauthentication } from './reauth.ts';
import { revoke } from './revocations.ts';
import { endAllSessions, endedBy, type OwnSignIn, ownFamily } from './sessions.ts';
import { retireTickets } from './tickets-store.ts';

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
    await recordEvent(deps, tx, {
      type: 'password_changed',
      accountId: account.id,
      sessionId: keep ?? null,
      client: input.own?.client ?? null,
      details: {},
    });
    await endAllSessions(deps, account.id, keep, tx, endedBy('password_changed', input.own));
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
    await deps.webhooks?.queue(tx, { type: 'user.deleted', userId, data: { by: 'self' } });
    // Its sessions went with it; every access token of the user is refused from now on.
    await revoke(deps, tx, { userId });
  });
}
