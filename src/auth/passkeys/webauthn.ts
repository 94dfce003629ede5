/**
 * The WebAuthn layer of passkeys: the relying party as the settings describe it, challenges (random,
 * stored hashed, single use, five minutes, bound to one ceremony), the checks that make a malformed
 * credential a 400 before any cryptography runs, and the calls into `@simplewebauthn/server`, whose
 * refusals become errors of the catalogue. The library checks the origin, the RP ID hash, the user
 * presence and (when required) user verification flags, the attestation and the signature; the signature
 * counter is checked here, where a counter going backwards can be told apart from a bad signature.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import { decodeAttestationObject, parseAuthenticatorData } from '@simplewebauthn/server/helpers';
import type { Config } from '../../config.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import type { ConfigDeps } from '../deps.ts';
import { type CeremonyKind, type ChallengeRow, consumeChallenge, insertChallenge } from './passkeys-store.ts';

/** How long a ceremony's challenge can be answered. */
export const CHALLENGE_TTL_MS = 5 * 60_000;

/** ES256, EdDSA and RS256: what platform authenticators and security keys make (no post-quantum yet). */
const ALGORITHMS = [-7, -8, -257];

const ATTESTATION_FORMATS = new Set([
  'none',
  'packed',
  'fido-u2f',
  'android-key',
  'android-safetynet',
  'tpm',
  'apple',
]);

const BASE64URL = /^[A-Za-z0-9_-]*$/;

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** Decodes a base64url field, refusing anything else (padding, `+`, `/`, spaces) with PASSKEY_MALFORMED. */
export function fromBase64url(value: string, field: string): Buffer {
  if (!BASE64URL.test(value) || value.length % 4 === 1)
    throw new AppError('PASSKEY_MALFORMED', `"${field}" is not base64url`);
  return Buffer.from(value, 'base64url');
}

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/** The relying party of this service (settings WEBAUTHN_*). */
function relyingParty(config: Config) {
  return {
    rpID: config.WEBAUTHN_RP_ID,
    rpName: config.WEBAUTHN_RP_NAME,
    origins: [...config.WEBAUTHN_ORIGINS],
    uvRequired: config.WEBAUTHN_USER_VERIFICATION === 'required',
  };
}

/** A new random WebAuthn user handle (64 bytes would do; 32 random bytes say nothing about the person). */
export function newUserHandle(): string {
  return b64url(randomBytes(32));
}

/** A challenge for `kind`, stored (hashed) with what its verify step needs. Returns it base64url. */
async function newChallenge(
  deps: ConfigDeps,
  db: Queryable,
  kind: CeremonyKind,
  bound: { accountId?: string; userHandle?: string; signup?: Record<string, unknown> },
): Promise<string> {
  const challenge = b64url(randomBytes(32));
  const now = deps.clock.now();
  await insertChallenge(db, {
    id: sha256Hex(challenge),
    kind,
    accountId: bound.accountId ?? null,
    userHandle: bound.userHandle ?? null,
    signup: bound.signup ?? null,
    createdAt: now,
    expiresAt: new Date(now.getTime() + CHALLENGE_TTL_MS),
  });
  return challenge;
}

export interface CreationRequest {
  kind: 'register' | 'signup';
  accountId?: string;
  userHandle: string;
  userName: string;
  displayName: string;
  exclude: readonly { credential_id: string; transports: readonly string[] }[];
  signup?: Record<string, unknown>;
}

/** Options for navigator.credentials.create(): a discoverable credential, attestation `none`. */
export async function creationOptions(
  deps: ConfigDeps,
  db: Queryable,
  req: CreationRequest,
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const rp = relyingParty(deps.config);
  const challenge = await newChallenge(deps, db, req.kind, {
    accountId: req.accountId,
    userHandle: req.userHandle,
    signup: req.signup,
  });
  return generateRegistrationOptions({
    rpName: rp.rpName,
    rpID: rp.rpID,
    userName: req.userName,
    userDisplayName: req.displayName,
    userID: Buffer.from(req.userHandle, 'base64url'),
    challenge: Buffer.from(challenge, 'base64url'),
    timeout: CHALLENGE_TTL_MS,
    attestationType: 'none',
    excludeCredentials: req.exclude.map((c) => ({
      id: c.credential_id,
      transports: [...c.transports] as never,
    })),
    authenticatorSelection: {
      residentKey: 'required',
      requireResidentKey: true,
      userVerification: deps.config.WEBAUTHN_USER_VERIFICATION,
    },
    supportedAlgorithmIDs: ALGORITHMS,
  });
}

/**
 * Options for navigator.credentials.get(): no `allowCredentials`, so the browser offers whatever passkey
 * it holds for this RP and nothing tells whether an address has an account (ready for conditional UI).
 */
export async function requestOptions(
  deps: ConfigDeps,
  db: Queryable,
  kind: 'login' | 'reauthenticate',
  accountId?: string,
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const challenge = await newChallenge(deps, db, kind, { accountId });
  return generateAuthenticationOptions({
    rpID: relyingParty(deps.config).rpID,
    challenge: Buffer.from(challenge, 'base64url'),
    timeout: CHALLENGE_TTL_MS,
    userVerification: deps.config.WEBAUTHN_USER_VERIFICATION,
  });
}

/** What the client data says, read before anything is verified (to find the challenge). */
interface ClientData {
  type: string;
  challenge: string;
}

function readClientData(encoded: string): ClientData {
  const raw = fromBase64url(encoded, 'response.clientDataJSON');
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch {
    throw new AppError('PASSKEY_MALFORMED', '"response.clientDataJSON" is not JSON');
  }
  const cd = parsed as Partial<Record<string, unknown>> | null;
  if (
    cd === null ||
    typeof cd !== 'object' ||
    typeof cd.type !== 'string' ||
    typeof cd.challenge !== 'string' ||
    typeof cd.origin !== 'string'
  )
    throw new AppError('PASSKEY_MALFORMED', '"response.clientDataJSON" lacks type, challenge or origin');
  return { type: cd.type, challenge: cd.challenge };
}

function checkCredentialId(cred: { id: string; rawId: string }): void {
  const id = fromBase64url(cred.id, 'id');
  fromBase64url(cred.rawId, 'rawId');
  if (cred.id !== cred.rawId) throw new AppError('PASSKEY_MALFORMED', '"id" and "rawId" differ');
  if (id.length === 0 || id.length > 1023)
    throw new AppError('PASSKEY_MALFORMED', '"id" must be 1 to 1023 bytes');
}

/**
 * Checks that a registration response is well-formed (base64url fields, client data, a decodable
 * attestation object of a known format) and uses up its challenge, which must belong to `kind` (and,
 * for a signed-in registration, to `accountId`). Anything wrong with the form is a 400
 * PASSKEY_MALFORMED that leaves the challenge alone; a dead challenge is PASSKEY_CHALLENGE_INVALID.
 */
export async function takeCreationChallenge(
  deps: ConfigDeps,
  db: Queryable,
  cred: RegistrationResponseJSON,
  kind: 'register' | 'signup',
  accountId?: string,
): Promise<{ challenge: string; row: ChallengeRow }> {
  checkCredentialId(cred);
  const clientData = readClientData(cred.response.clientDataJSON);
  const attestation = fromBase64url(cred.response.attestationObject, 'response.attestationObject');
  let fmt: string;
  try {
    const decoded = decodeAttestationObject(new Uint8Array(attestation));
    fmt = decoded.get('fmt');
    const authData = decoded.get('authData');
    if (!(authData instanceof Uint8Array)) throw new Error('no authData');
    parseAuthenticatorData(authData);
  } catch {
    throw new AppError('PASSKEY_MALFORMED', '"response.attestationObject" is not a CBOR attestation object');
  }
  if (typeof fmt !== 'string' || !ATTESTATION_FORMATS.has(fmt))
    throw new AppError('PASSKEY_MALFORMED', 'unknown attestation format');
  const row = await takeChallenge(deps, db, clientData.challenge, kind, accountId);
  return { challenge: clientData.challenge, row };
}

/** The same for a sign-in or step-up response. */
export async function takeRequestChallenge(
  deps: ConfigDeps,
  db: Queryable,
  cred: AuthenticationResponseJSON,
  kind: 'login' | 'reauthenticate',
  accountId?: string,
): Promise<{ challenge: string; row: ChallengeRow }> {
  checkCredentialId(cred);
  const clientData = readClientData(cred.response.clientDataJSON);
  const authData = fromBase64url(cred.response.authenticatorData, 'response.authenticatorData');
  if (authData.length < 37)
    throw new AppError('PASSKEY_MALFORMED', '"response.authenticatorData" is too short');
  if (fromBase64url(cred.response.signature, 'response.signature').length === 0)
    throw new AppError('PASSKEY_MALFORMED', '"response.signature" is empty');
  if (cred.response.userHandle !== undefined) fromBase64url(cred.response.userHandle, 'response.userHandle');
  const row = await takeChallenge(deps, db, clientData.challenge, kind, accountId);
  return { challenge: clientData.challenge, row };
}

async function takeChallenge(
  deps: ConfigDeps,
  db: Queryable,
  challenge: string,
  kind: CeremonyKind,
  accountId: string | undefined,
): Promise<ChallengeRow> {
  if (!BASE64URL.test(challenge) || challenge.length > 200) throw new AppError('PASSKEY_CHALLENGE_INVALID');
  const row = await consumeChallenge(db, sha256Hex(challenge));
  if (
    !row ||
    row.kind !== kind ||
    row.expires_at.getTime() <= deps.clock.now().getTime() ||
    (accountId !== undefined && row.account_id !== accountId)
  )
    throw new AppError('PASSKEY_CHALLENGE_INVALID');
  return row;
}

export interface VerifiedCreation {
  credentialId: string;
  publicKey: Uint8Array;
  counter: number;
  transports: string[];
  backedUp: boolean;
  userVerified: boolean;
}

/** Verifies a registration response against its challenge; 400 PASSKEY_NOT_VERIFIED when refused. */
export async function verifyCreation(
  config: Config,
  cred: RegistrationResponseJSON,
  challenge: string,
): Promise<VerifiedCreation> {
  const rp = relyingParty(config);
  let result: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    result = await verifyRegistrationResponse({
      response: cred,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.rpID,
      expectedType: 'webauthn.create',
      requireUserPresence: true,
      requireUserVerification: rp.uvRequired,
      supportedAlgorithmIDs: ALGORITHMS,
    });
  } catch (err) {
    throw new AppError('PASSKEY_NOT_VERIFIED', refusal(err), { cause: err });
  }
  if (!result.verified) throw new AppError('PASSKEY_NOT_VERIFIED');
  const info = result.registrationInfo;
  // The credential the authenticator made must be the one the client names.
  if (info.credential.id !== cred.id)
    throw new AppError('PASSKEY_NOT_VERIFIED', 'The credential id does not match.');
  return {
    credentialId: info.credential.id,
    publicKey: info.credential.publicKey,
    counter: info.credential.counter,
    transports: (cred.response.transports ?? []).filter((t) => typeof t === 'string').slice(0, 10),
    backedUp: info.credentialBackedUp,
    userVerified: info.userVerified,
  };
}

export interface VerifiedAssertion {
  counter: number;
  backedUp: boolean;
  userVerified: boolean;
}

/**
 * Verifies a sign-in response with the stored passkey; 401 PASSKEY_INVALID when refused, and 401
 * PASSKEY_COUNTER_REGRESSED when everything holds but the signature counter did not move forward.
 */
export async function verifyAssertion(
  config: Config,
  cred: AuthenticationResponseJSON,
  challenge: string,
  stored: { credential_id: string; public_key: Uint8Array; counter: number; transports: string[] },
): Promise<VerifiedAssertion> {
  const rp = relyingParty(config);
  let result: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
  try {
    result = await verifyAuthenticationResponse({
      response: cred,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.rpID,
      expectedType: 'webauthn.get',
      // The counter is compared below, so a clone is told apart from a forgery.
      credential: {
        id: stored.credential_id,
        publicKey: new Uint8Array(stored.public_key),
        counter: 0,
        transports: stored.transports as never,
      },
      requireUserVerification: rp.uvRequired,
    });
  } catch (err) {
    throw new AppError('PASSKEY_INVALID', undefined, { cause: err });
  }
  if (!result.verified) throw new AppError('PASSKEY_INVALID');
  const { newCounter, credentialBackedUp, userVerified } = result.authenticationInfo;
  if (counterRegressed(stored.counter, newCounter)) throw new AppError('PASSKEY_COUNTER_REGRESSED');
  return { counter: newCounter, backedUp: credentialBackedUp, userVerified };
}

/**
 * WebAuthn §7.2 step 22: when either counter is non-zero, the new one must be greater. Authenticators
 * that do not count (synced passkeys) send 0 every time, which is allowed.
 */
export function counterRegressed(stored: number, received: number): boolean {
  return (stored > 0 || received > 0) && received <= stored;
}

/** The library's reason, for the registrant's message: it names a check (origin, RP ID…), never a secret. */
function refusal(err: unknown): string | undefined {
  const msg = err instanceof Error ? err.message : '';
  if (/origin/i.test(msg)) return 'The new passkey was made on an origin that is not allowed.';
  if (/rp ?id/i.test(msg)) return 'The new passkey was made for another relying party.';
  if (/user (presence|was not present)/i.test(msg)) return 'The authenticator did not report user presence.';
  if (/user verification/i.test(msg)) return 'The authenticator did not verify the user, and it is required.';
  return undefined;
}
