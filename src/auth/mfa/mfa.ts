/**
 * Multi-factor authentication with TOTP (contract §7), with HBP's defects fixed:
 * - `generate`, `enable` and `disable` are sensitive changes: they need a recent sign-in or the current
 *   password (see reauth.ts), so a stolen access token can neither turn MFA off nor lock the owner out
 *   by turning it on with the thief's secret.
 * - `generate` stores a *pending* secret; the active one changes only on `enable` (D7).
 * - A login ticket allows MFA_TICKET_MAX_ATTEMPTS codes, and wrong codes are also limited per account (D6).
 * - A code accepted once is never accepted again (RFC 6238 §5.2).
 * - Secrets are encrypted at rest (see secret-box.ts).
 */
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import type { SessionDeps } from '../deps.ts';
import { assertReauthenticated, type Reauthentication } from '../reauth.ts';
import {
  endAllSessions,
  endedBy,
  issueSession,
  type OwnSignIn,
  ownFamily,
  type Session,
} from '../sessions.ts';
import * as store from './mfa-store.ts';
import { SecretBox, SecretBoxError } from './secret-box.ts';
import { base32Decode, base32Encode, generateSecret, otpauthUri, verifyTotp } from './totp.ts';

/** Codes one login ticket allows; the next attempt finds the ticket dead, even with the right code. */
export const MFA_TICKET_MAX_ATTEMPTS = 5;

/** What sessions need, plus the box that encrypts secrets. */
export interface MfaDeps extends SessionDeps {
  readonly box: SecretBox;
}

export interface GeneratedSecret {
  /** The otpauth URI as a QR code, `data:image/png;base64,…`. */
  image_url: string;
  /** The secret in base32, for typing into an authenticator by hand. */
  otp_secret: string;
}

/** The caller's account, once the request has proved more than a bearer token (reauth.ts). */
async function signedInAccount(
  deps: MfaDeps,
  userId: string,
  reauth: Reauthentication,
): Promise<store.MfaAccount> {
  const account = await store.findMfaAccountByUserId(deps.db, userId);
  // The token outlived its account (deleted since): not signed in, as for every other protected route.
  if (!account) throw new AppError('UNAUTHENTICATED');
  await assertReauthenticated(
    deps,
    { id: account.id, email: account.email, password_hash: account.passwordHash },
    reauth,
  );
  return account;
}

/** The raw secret of a stored value: sealed, or base32 in clear as HBP wrote it. */
function openSecret(deps: MfaDeps, value: string, accountId: string): Buffer {
  if (!SecretBox.isSealed(value)) return base32Decode(value);
  try {
    return deps.box.open(value, accountId);
  } catch (err) {
    // The key that sealed it is not configured (or the row was tampered with): an operator problem.
    if (err instanceof SecretBoxError) throw new AppError('INTERNAL', undefined, { cause: err });
    throw err;
  }
}

/** Counts a code attempt for the account; 429 when its wrong codes are over the limit. */
async function limitCodeAttempts(deps: MfaDeps, accountId: string): Promise<void> {
  const { config, clock } = deps;
  if (!config.RATE_LIMIT_ENABLED) return;
  const now = clock.now();
  const windowS = config.RATE_LIMIT_MFA_ACCOUNT_WINDOW / 1000;
  const { count, windowEnds } = await store.countCodeAttempt(deps.db, accountId, now, windowS);
  if (count > config.RATE_LIMIT_MFA_ACCOUNT_MAX) {
    const retryAfter = Math.max(1, Math.ceil((windowEnds.getTime() - now.getTime()) / 1000));
    throw new AppError('RATE_LIMITED', 'Too many wrong two-factor codes; try again later.', {
      headers: { 'retry-after': String(retryAfter) },
    });
  }
}

/**
 * Checks `code` against `secret` and, inside `tx`, records its step so it cannot be used again.
 * Throws 401 for a wrong or already used code.
 */
async function acceptCode(
  deps: MfaDeps,
  tx: Queryable,
  account: store.MfaAccount,
  secret: Buffer,
  code: string,
): Promise<void> {
  const now = deps.clock.now();
  const step = verifyTotp(secret, code, now.getTime(), { window: 1, lastUsedStep: account.lastUsedStep });
  // A concurrent request may have claimed a later step since the account was read: claimStep re-checks.
  if (step === null || !(await store.claimStep(tx, account.id, step, now)))
    throw new AppError('INVALID_TOTP');
}

/** A new pending secret for the signed-in user, with its QR code. The active secret stays as it is. */
export async function generateMfaSecret(
  deps: MfaDeps,
  userId: string,
  reauth: Reauthentication,
): Promise<GeneratedSecret> {
  const account = await signedInAccount(deps, userId, reauth);
  const secret = generateSecret();
  const otpSecret = base32Encode(secret);
  await store.savePendingSecret(deps.db, account.id, deps.box.seal(secret, account.id), deps.clock.now());
  const uri = otpauthUri({
    issuer: deps.config.OTP_ISSUER,
    account: account.email ?? account.userId,
    secret: otpSecret,
  });
  // Loaded with the first set-up rather than at start: most requests never draw a QR code.
  const { default: QRCode } = await import('qrcode');
  const image_url = await QRCode.toDataURL(uri, { errorCorrectionLevel: 'M' });
  return { image_url, otp_secret: otpSecret };
}

/** Turns MFA on with the pending secret, given a current code from it. */
export async function enableMfa(
  deps: MfaDeps,
  userId: string,
  code: string,
  reauth: Reauthentication,
  own: OwnSignIn = {},
): Promise<void> {
  const account = await signedInAccount(deps, userId, reauth);
  if (account.mfaEnabled) throw new AppError('MFA_ALREADY_ENABLED');
  // An HBP database may hold a generated but not yet enabled secret in otp_secret.
  const candidate = account.pendingSecret ?? account.otpSecret;
  if (!candidate) throw new AppError('OTP_SECRET_NOT_SET');
  const secret = openSecret(deps, candidate, account.id);
  await limitCodeAttempts(deps, account.id);
  await deps.db.transaction(async (tx) => {
    await acceptCode(deps, tx, account, secret, code);
    if (!(await store.activateMfa(tx, account.id, deps.box.seal(secret, account.id), deps.clock.now())))
      throw new AppError('MFA_ALREADY_ENABLED');
    await recordEvent(deps, tx, {
      type: 'mfa_enabled',
      accountId: account.id,
      sessionId: own.sessionId ?? null,
      client: own.client ?? null,
      details: {},
    });
  });
}

/**
 * Turns MFA off, given a current code from the active secret. Every other session of the account ends
 * (a thief who signed in with the second factor is signed out); the caller's own sign-in (`own`, see
 * ownFamily) is kept.
 */
export async function disableMfa(
  deps: MfaDeps,
  userId: string,
  code: string,
  reauth: Reauthentication,
  own: OwnSignIn = {},
): Promise<void> {
  const account = await signedInAccount(deps, userId, reauth);
  if (!account.mfaEnabled) throw new AppError('MFA_ALREADY_DISABLED');
  if (!account.otpSecret) throw new AppError('OTP_SECRET_NOT_SET');
  const secret = openSecret(deps, account.otpSecret, account.id);
  await limitCodeAttempts(deps, account.id);
  await deps.db.transaction(async (tx) => {
    await acceptCode(deps, tx, account, secret, code);
    const keepFamily = await ownFamily(deps, account.id, own, tx);
    const now = deps.clock.now();
    if (!(await store.deactivateMfa(tx, account.id, now))) throw new AppError('MFA_ALREADY_DISABLED');
    await store.retireMfaTickets(tx, account.id, now);
    await recordEvent(deps, tx, {
      type: 'mfa_disabled',
      accountId: account.id,
      sessionId: keepFamily ?? null,
      client: own.client ?? null,
      details: {},
    });
    await endAllSessions(deps, account.id, keepFamily, tx, endedBy('mfa_changed', own));
  });
}

/**
 * The second step of a login: checks `code` for the account behind an MFA-login ticket, uses the ticket
 * up and opens a session, all in one transaction (a failure leaves the ticket and the code unused).
 * Unknown, expired, used or exhausted tickets give 401.
 */
export async function completeMfaLogin(
  deps: MfaDeps,
  ticket: string,
  code: string,
  client?: EventClient,
): Promise<Session> {
  const attempt = await store.countTicketAttempt(deps.db, ticket, deps.clock.now(), MFA_TICKET_MAX_ATTEMPTS);
  if (!attempt) throw new AppError('INVALID_TICKET');
  const account = await store.findMfaAccountById(deps.db, attempt.accountId);
  if (!account) throw new AppError('INVALID_TICKET');
  if (!account.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
  if (!account.mfaEnabled) throw new AppError('MFA_NOT_ENABLED');
  if (!account.otpSecret) throw new AppError('OTP_SECRET_NOT_SET');
  const secret = openSecret(deps, account.otpSecret, account.id);
  await limitCodeAttempts(deps, account.id);
  try {
    return await deps.db.transaction(async (tx) => {
      await acceptCode(deps, tx, account, secret, code);
      if (!(await store.useTicket(tx, ticket, deps.clock.now()))) throw new AppError('INVALID_TICKET');
      return issueSession(deps, account.id, { db: tx, method: 'mfa', client });
    });
  } catch (err) {
    // Whoever sends a wrong code knows the password: the owner should hear of it (one event a minute at most).
    if (err instanceof AppError && err.code === 'INVALID_TOTP')
      await recordEvent(deps, deps.db, {
        type: 'sign_in_failed',
        accountId: account.id,
        client: client ?? null,
        details: { reason: 'mfa_code' },
      });
    throw err;
  }
}

/**
 * Re-encrypts active secrets that are in clear (written by HBP) or sealed under a retired key, so that
 * after one start with a new MFA_ENCRYPTION_KEY the old one can be dropped. Secrets that cannot be
 * opened (their key is not configured) are left alone and counted.
 */
export async function resealSecrets(
  deps: Pick<MfaDeps, 'db' | 'box'>,
): Promise<{ resealed: number; unreadable: number }> {
  const prefix = `gh1:${deps.box.currentKeyId}:`;
  let afterId: string | null = null;
  let resealed = 0;
  let unreadable = 0;
  for (;;) {
    const rows = await store.listSecretsToReseal(deps.db, prefix, afterId, 200);
    if (rows.length === 0) break;
    for (const row of rows) {
      afterId = row.id;
      let secret: Buffer;
      try {
        secret = SecretBox.isSealed(row.otp_secret)
          ? deps.box.open(row.otp_secret, row.id)
          : base32Decode(row.otp_secret);
      } catch {
        unreadable++;
        continue;
      }
      await store.resealActiveSecret(deps.db, row.id, row.otp_secret, deps.box.seal(secret, row.id));
      resealed++;
    }
  }
  return { resealed, unreadable };
}
