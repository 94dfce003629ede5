/**
 * Passkeys: the four ceremonies (add a passkey to a signed-in account, sign in, sign up, step up) and the
 * owner's list, rename and delete. Each ceremony is two calls: options (a challenge stored for that
 * ceremony only) and verify (the challenge used up first, in a statement of its own, so that a refused
 * answer can never be replayed; then everything else in one transaction, so a refusal leaves no passkey,
 * account or session behind). The checks themselves are in webauthn.ts.
 *
 * Multi-factor: a passkey sign-in whose authenticator verified the person (PIN, biometrics: the UV flag)
 * is two factors in one (something held, something known or been), so an account with TOTP is not asked
 * for a code; without UV it is one factor, and such an account gets the MFA step like a password
 * sign-in. Every verified passkey sign-in is a fresh sign-in for SENSITIVE_ACTION_WINDOW.
 */
import { randomUUID } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { signInEvent } from '../../metrics/events.ts';
import { callerAccount } from '../accounts.ts';
import { type AccountRow, loadProfile } from '../accounts-store.ts';
import type { AuthDeps, SessionDeps } from '../deps.ts';
import {
  choosePasskeySignup,
  type PasskeySignupChoice,
  type RegisterInput,
  type RegisterResult,
  registerWithPasskey,
} from '../flows/registration.ts';
import type { SignedToken } from '../jwt.ts';
import { accountLinks, lockAccount } from '../oauth/links-store.ts';
import { assertReauthenticated, type Reauthentication } from '../reauth.ts';
import { accessTokenFor, issueSession, type Session } from '../sessions.ts';
import { issueTicket } from '../tickets-store.ts';
import {
  accountUserHandle,
  countPasskeys,
  deletePasskey,
  findUsablePasskey,
  insertPasskey,
  listPasskeys,
  type PasskeyView,
  recordPasskeyUse,
  renamePasskey,
  type StoredPasskey,
} from './passkeys-store.ts';
import {
  creationOptions,
  newUserHandle,
  requestOptions,
  takeCreationChallenge,
  takeRequestChallenge,
  type VerifiedAssertion,
  verifyAssertion,
  verifyCreation,
} from './webauthn.ts';

export type { PasskeyView };

/** The name a passkey gets when none is given. */
const DEFAULT_NAME = 'Passkey';

/** Options to add a passkey to the caller's account: a sensitive change (reauth.ts). */
export async function addPasskeyOptions(
  deps: SessionDeps,
  userId: string,
  reauth: Reauthentication,
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const account = await callerAccount(deps, userId);
  await assertReauthenticated(deps, account, reauth);
  const profile = await loadProfile(deps.db, account.id);
  const existing = await listPasskeys(deps.db, account.id);
  const userName = account.email ?? profile?.user.display_name ?? account.user_id;
  return creationOptions(deps, deps.db, {
    kind: 'register',
    accountId: account.id,
    // One user handle per account: an authenticator then keeps one passkey per account, not a pile.
    userHandle: (await accountUserHandle(deps.db, account.id)) ?? newUserHandle(),
    userName,
    displayName: profile?.user.display_name ?? userName,
    exclude: existing,
  });
}

/** Where a request came from, for the events it records: its client and, signed in, its session. */
export interface RequestOrigin {
  client: EventClient;
  sessionId?: string;
}

/** Verifies the new passkey of the caller and stores it (event `passkey_added`). */
export async function addPasskey(
  deps: SessionDeps,
  userId: string,
  credential: RegistrationResponseJSON,
  name: string | undefined,
  from: RequestOrigin,
): Promise<PasskeyView> {
  const account = await callerAccount(deps, userId);
  const { challenge, row } = await takeCreationChallenge(deps, deps.db, credential, 'register', account.id);
  const made = await verifyCreation(deps.config, credential, challenge);
  return deps.db.transaction(async (tx) => {
    const added = await insertPasskey(tx, {
      id: randomUUID(),
      accountId: account.id,
      attemptId: null,
      credentialId: made.credentialId,
      publicKey: made.publicKey,
      counter: made.counter,
      transports: made.transports,
      backedUp: made.backedUp,
      userHandle: row.user_handle ?? newUserHandle(),
      name: name ?? DEFAULT_NAME,
      createdAt: deps.clock.now(),
    });
    await recordEvent(deps, tx, {
      type: 'passkey_added',
      details: { passkey: added.id, name: added.name },
      accountId: account.id,
      ...from,
    });
    return added;
  });
}

/** Options to sign in: any passkey of this RP (discoverable credentials). */
export function signInOptions(deps: SessionDeps): Promise<PublicKeyCredentialRequestOptionsJSON> {
  return requestOptions(deps, deps.db, 'login');
}

/** A verified assertion and the passkey that made it. */
interface Asserted {
  passkey: StoredPasskey;
  verified: VerifiedAssertion;
}

/**
 * Checks an assertion against the stored passkey it names and records its use. Unknown credentials, a
 * user handle that is not the passkey's, a bad signature, origin, RP ID hash or flag: PASSKEY_INVALID;
 * a counter that did not move forward: PASSKEY_COUNTER_REGRESSED (a cloned authenticator), and the
 * event `passkey_clone_detected` in the owner's feed.
 */
async function assertPasskey(
  deps: SessionDeps,
  credential: AuthenticationResponseJSON,
  challenge: string,
  from: RequestOrigin,
): Promise<Asserted> {
  const passkey = await findUsablePasskey(deps.db, credential.id);
  if (!passkey) throw new AppError('PASSKEY_INVALID');
  const handle = credential.response.userHandle;
  if (handle !== undefined && handle !== '' && handle !== passkey.user_handle)
    throw new AppError('PASSKEY_INVALID');
  try {
    const verified = await verifyAssertion(deps.config, credential, challenge, passkey);
    // Conditional on the stored counter: of two answers with one counter (a clone racing), one wins.
    const moved = await recordPasskeyUse(deps.db, passkey.id, {
      counter: verified.counter,
      backedUp: verified.backedUp,
      at: deps.clock.now(),
    });
    if (!moved) throw new AppError('PASSKEY_COUNTER_REGRESSED');
    return { passkey, verified };
  } catch (err) {
    // The signature was right but the counter went back: another copy of the key is in use, and the
    // owner hears of it. Recorded on its own: the refused sign-in has no transaction to share.
    if (err instanceof AppError && err.code === 'PASSKEY_COUNTER_REGRESSED')
      await recordEvent(deps, deps.db, {
        type: 'passkey_clone_detected',
        details: { passkey: passkey.id, name: passkey.name },
        accountId: passkey.account_id,
        ...from,
      });
    throw err;
  }
}

export type PasskeySignInResult = { kind: 'session'; session: Session } | { kind: 'mfa'; ticket: string };

/**
 * Signs in with a passkey: a session (method `passkey`, whose `sign_in` event issueSession records), or
 * the MFA step for an account with TOTP when the authenticator did not verify the person. Refused as a
 * sign-in with a password is for an account that is not activated or is disabled.
 */
export async function signInWithPasskey(
  deps: SessionDeps,
  credential: AuthenticationResponseJSON,
  client: EventClient,
): Promise<PasskeySignInResult> {
  const { challenge } = await takeRequestChallenge(deps, deps.db, credential, 'login');
  const { passkey, verified } = await assertPasskey(deps, credential, challenge, { client });
  const profile = await loadProfile(deps.db, passkey.account_id);
  if (!profile) throw new AppError('PASSKEY_INVALID');
  const account = profile.account;
  if (!account.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
  if (account.disabled) throw new AppError('ACCOUNT_DISABLED');
  if (account.mfa_enabled && !verified.userVerified) {
    const { ticket } = await issueTicket(deps.db, deps.config, deps.clock.now(), {
      accountId: account.id,
      purpose: 'mfa-login',
      keepEarlier: true,
    });
    signInEvent('passkey', 'mfa_required');
    return { kind: 'mfa', ticket };
  }
  const session = await issueSession(deps, account.id, { profile, method: 'passkey', client });
  signInEvent('passkey', 'success');
  return { kind: 'session', session };
}

/** Options for a sign-up with a passkey: the registration rules are checked first (choosePasskeySignup). */
export async function signUpOptions(
  deps: AuthDeps,
  input: RegisterInput & { displayName?: string },
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const choice = await choosePasskeySignup(deps, input);
  return creationOptions(deps, deps.db, {
    kind: 'signup',
    userHandle: newUserHandle(),
    userName: choice.email,
    displayName: input.displayName ?? choice.email,
    exclude: [],
    signup: { ...choice },
  });
}

/** Verifies a sign-up's passkey and makes the account (registerWithPasskey). */
export async function signUpWithPasskey(
  deps: AuthDeps,
  credential: RegistrationResponseJSON,
  client: EventClient,
): Promise<RegisterResult> {
  const { challenge, row } = await takeCreationChallenge(deps, deps.db, credential, 'signup');
  const made = await verifyCreation(deps.config, credential, challenge);
  const choice = row.signup as unknown as PasskeySignupChoice;
  const passkey = {
    credentialId: made.credentialId,
    publicKey: made.publicKey,
    counter: made.counter,
    transports: made.transports,
    backedUp: made.backedUp,
    userHandle: row.user_handle ?? newUserHandle(),
    name: DEFAULT_NAME,
  };
  return registerWithPasskey(deps, choice, passkey, client);
}

/** Options to step up: bound to the caller's account. */
export async function stepUpOptions(
  deps: SessionDeps,
  userId: string,
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const account = await callerAccount(deps, userId);
  return requestOptions(deps, deps.db, 'reauthenticate', account.id);
}

/**
 * Step-up: a passkey of the caller's own account answers the challenge, and the caller's session gets an
 * access token whose `auth_time` is now, so the sensitive changes of SENSITIVE_ACTION_WINDOW accept it.
 * The refresh tokens keep the session's sign-in instant: the window opens for this token only.
 */
export async function stepUpWithPasskey(
  deps: SessionDeps,
  userId: string,
  credential: AuthenticationResponseJSON,
  from: RequestOrigin,
): Promise<SignedToken> {
  const account = await callerAccount(deps, userId);
  const { challenge } = await takeRequestChallenge(deps, deps.db, credential, 'reauthenticate', account.id);
  // Another account's passkey is refused before it is verified or counted.
  const owned = await findUsablePasskey(deps.db, credential.id);
  if (!owned || owned.account_id !== account.id) throw new AppError('PASSKEY_INVALID');
  await assertPasskey(deps, credential, challenge, from);
  const sessionId = from.sessionId;
  if (sessionId === undefined) throw new AppError('REAUTHENTICATION_REQUIRED');
  const profile = await loadProfile(deps.db, account.id);
  if (!profile) throw new AppError('UNAUTHENTICATED');
  const now = deps.clock.now();
  return (await accessTokenFor(deps, profile, now, now, sessionId)).access;
}

export async function ownPasskeys(deps: SessionDeps, userId: string): Promise<PasskeyView[]> {
  const account = await callerAccount(deps, userId);
  return listPasskeys(deps.db, account.id);
}

/** Renames one of the caller's passkeys; 404 for an id that is not one of them. */
export async function renameOwnPasskey(
  deps: SessionDeps,
  userId: string,
  id: string,
  name: string,
): Promise<PasskeyView> {
  const account = await callerAccount(deps, userId);
  const renamed = isUuid(id) ? await renamePasskey(deps.db, account.id, id, name) : undefined;
  if (!renamed) throw new AppError('PASSKEY_NOT_FOUND');
  return renamed;
}

/**
 * Deletes one of the caller's passkeys: a sensitive change (reauth.ts), refused with 409
 * LAST_SIGN_IN_METHOD when no other way to sign in would remain (a password, another passkey, a linked
 * provider, or magic links to the account's address).
 */
export async function deleteOwnPasskey(
  deps: SessionDeps,
  userId: string,
  id: string,
  reauth: Reauthentication,
  from: RequestOrigin,
): Promise<PasskeyView> {
  const account = await callerAccount(deps, userId);
  if (!isUuid(id)) throw new AppError('PASSKEY_NOT_FOUND');
  await assertReauthenticated(deps, account, reauth);
  return deps.db.transaction(async (tx) => {
    // Two deletions at once must not both see the other's passkey as the remaining way in.
    await lockAccount(tx, account.id);
    const removed = await deletePasskey(tx, account.id, id);
    if (!removed) throw new AppError('PASSKEY_NOT_FOUND');
    if (!(await otherWayIn(deps, tx, account))) throw new AppError('LAST_SIGN_IN_METHOD');
    await recordEvent(deps, tx, {
      type: 'passkey_removed',
      details: { passkey: removed.id, name: removed.name },
      accountId: account.id,
      ...from,
    });
    return removed;
  });
}

/** Whether the account can still sign in without the passkey just removed (in `tx`). */
async function otherWayIn(
  deps: SessionDeps,
  tx: Parameters<typeof countPasskeys>[0],
  account: AccountRow,
): Promise<boolean> {
  if (account.password_hash !== null) return true;
  if (deps.config.MAGIC_LINK_ENABLED && account.email !== null) return true;
  if ((await countPasskeys(tx, account.id)) > 0) return true;
  return (await accountLinks(tx, account.id)).length > 0;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const isUuid = (s: string) => UUID.test(s);
