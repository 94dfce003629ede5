/**
 * Access tokens: Hasura claims (contract §2.4) signed with the configured key, and their verification,
 * pinned to the configured algorithm so `alg: none` or an algorithm swap never authenticates.
 */
import { createHmac, type KeyObject } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { Config } from '../config.ts';
import { kebabCase } from './claim-names.ts';
import { type JwtKeys, signingKeyAt, verifyingKeysAt } from './keys.ts';

/** Un-prefixed permission variables, as storage rules see them in `request.auth`. */
export type PermissionVariables = {
  'user-id': string;
  'allowed-roles': string[];
  'default-role': string;
} & Record<string, string | string[]>;

export interface ClaimsInput {
  userId: string;
  defaultRole: string;
  /** Role names in database order; the default role is appended when missing. */
  roles: string[];
  /** `public.users` columns named in JWT_CUSTOM_FIELDS, by column name. */
  customFields: Record<string, unknown>;
}

/** HBP's stringification of custom claim values: arrays become Postgres array literals, the rest JSON. */
export function claimValue(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value))
    return `{${value.map((v) => `"${typeof v === 'string' ? v : JSON.stringify(v)}"`).join(',')}}`;
  return JSON.stringify(value ?? null);
}

export function permissionVariables(
  input: ClaimsInput,
  customFieldNames: readonly string[],
): PermissionVariables {
  const roles = input.roles.includes(input.defaultRole)
    ? [...input.roles]
    : [...input.roles, input.defaultRole];
  const reserved = {
    'user-id': input.userId,
    'allowed-roles': roles,
    'default-role': input.defaultRole,
  };
  // Reserved claims first for HBP's key order, and again last so that they win: a custom field is a
  // column a user may have written (REGISTRATION_CUSTOM_FIELDS), and must never name another user.
  const vars: Record<string, string | string[]> = { ...reserved };
  for (const name of customFieldNames) vars[kebabCase(name)] = claimValue(input.customFields[name]);
  return Object.assign(vars, reserved) as PermissionVariables;
}

/** The claim carrying the session's sign-in instant, in seconds (OpenID Connect Core §2). */
export const AUTH_TIME_CLAIM = 'auth_time';

/** The claim naming the session (the refresh-token family) a token was issued in. */
export const SESSION_ID_CLAIM = 'sid';

/** What a verified token says of itself beyond its permission variables. */
export interface TokenFacts {
  readonly userId: string;
  /** The session's id (`sid`); undefined for tokens signed before sessions had ids. */
  readonly sessionId: string | undefined;
  /** `iat`, in seconds (0 when absent). */
  readonly issuedAt: number;
}

/** Facts of verified tokens, by their (frozen, cached) permission variables. */
const factsByVars = new WeakMap<PermissionVariables, TokenFacts>();

/** The session and issue time of the token `vars` came from (undefined for variables not verified here). */
export function tokenFacts(vars: PermissionVariables): TokenFacts | undefined {
  return factsByVars.get(vars);
}

export interface SignedToken {
  token: string;
  /** Lifetime in milliseconds (HBP's `jwt_expires_in`). */
  expiresInMs: number;
  expiresAt: Date;
}

/**
 * Signs an access token issued at `now`. `authTime` is the instant of the sign-in that started the session
 * (OIDC's `auth_time`, seconds): sensitive routes read it to tell a recent sign-in from an old session
 * kept alive by refreshes. Without it (a session older than the column) no sign-in counts as recent.
 */
export async function signAccessToken(
  keys: JwtKeys,
  config: Config,
  vars: PermissionVariables,
  now: Date,
  opts: { authTime?: Date | null; sessionId?: string } = {},
): Promise<SignedToken> {
  const claims: Record<string, string | string[]> = {};
  // Hasura reads `x-hasura-*`; key order follows HBP: user-id, allowed-roles, default-role, custom fields.
  for (const [k, v] of Object.entries(vars)) claims[`x-hasura-${k}`] = v;
  const iat = Math.floor(now.getTime() / 1000);
  const lifetimeS = config.JWT_EXPIRES_IN * 60;
  const signer = signingKeyAt(keys, now);
  const header = signer.kid ? { alg: keys.algorithm, kid: signer.kid } : { alg: keys.algorithm };
  const payload: Record<string, unknown> = { [config.JWT_CLAIMS_NAMESPACE]: claims };
  // A standard top-level claim: Hasura reads only its namespace and ignores it.
  if (opts.authTime) payload[AUTH_TIME_CLAIM] = Math.floor(opts.authTime.getTime() / 1000);
  // The session the token belongs to (OpenID Connect's `sid`): what revocation and "this session" name.
  if (opts.sessionId) payload[SESSION_ID_CLAIM] = opts.sessionId;
  let token: string;
  if (isHmac(keys.algorithm)) {
    // The same claims, in the same order, as jose's builder below writes them (src/auth/jwt.test.ts
    // checks the two agree byte for byte); the HMAC runs synchronously, without WebCrypto's job queue.
    Object.assign(payload, { sub: vars['user-id'], iss: config.JWT_ISSUER, iat, exp: iat + lifetimeS });
    token = signHmacJwt(keys.algorithm, keys.signingKey, header, payload);
  } else {
    token = await new SignJWT(payload)
      .setProtectedHeader(header)
      .setSubject(vars['user-id'])
      .setIssuer(config.JWT_ISSUER)
      .setIssuedAt(iat)
      .setExpirationTime(iat + lifetimeS)
      .sign(signer.key);
  }
  return { token, expiresInMs: lifetimeS * 1000, expiresAt: new Date((iat + lifetimeS) * 1000) };
}

function isHmac(alg: string): alg is 'HS256' | 'HS384' | 'HS512' {
  return alg === 'HS256' || alg === 'HS384' || alg === 'HS512';
}

/** A compact JWS (RFC 7515) signed with HMAC-SHA-256/384/512 by node:crypto, synchronously. */
export function signHmacJwt(
  alg: 'HS256' | 'HS384' | 'HS512',
  key: KeyObject,
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
): string {
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(
    JSON.stringify(payload),
  ).toString('base64url')}`;
  const signature = createHmac(`sha${alg.slice(2)}`, key)
    .update(input)
    .digest('base64url');
  return `${input}.${signature}`;
}

export class InvalidAccessToken extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface Verified {
  vars: PermissionVariables;
  /** The token's `exp` and `nbf` (seconds), checked again on every use. */
  exp: number;
  nbf: number | undefined;
  /**
   * Until when (epoch milliseconds) the key that verified the token stays live: Infinity for the current
   * key, the end of the rotation for a retired one. Checked again on every use, so a remembered token
   * stops working the moment its key is retired, as a token seen for the first time would.
   */
  keyLiveUntil: number;
}

/**
 * Leeway (seconds) for clocks of instances that sign and verify: an `iat` this far ahead of ours, and a
 * lifetime this much longer than JWT_EXPIRES_IN, are still taken as this service's own.
 */
const LIFETIME_SKEW_S = 60;

/** Printable, short and quote-free: the token's own header or claim, echoed in a refusal. */
function shown(v: unknown): string {
  return `'${String(v)
    .replace(/[^\w.:/@+-]/g, '?')
    .slice(0, 64)}'`;
}

/**
 * Why jose refused a token, in words that say what to do. It tells only what the caller's own token
 * holds and what this service signs with (public facts: the algorithm, the issuer in every token).
 */
/** A token whose `kid` names no key this service accepts now. */
class UnknownKey extends Error {
  constructor(readonly kid: string) {
    super('unknown kid');
  }
}

function refusal(err: unknown, keys: JwtKeys, config: Config): string {
  if (err instanceof UnknownKey)
    return `access token is signed with a key this service does not accept (kid ${shown(err.kid)}: another service's, or one retired by a key rotation whose tokens have all expired)`;
  if (err instanceof joseErrors.JWTExpired)
    return 'access token expired; get a new one from /auth/token/refresh';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'exp' && err.reason === 'missing') return 'access token has no expiry (exp)';
    if (err.claim === 'iat' && err.reason === 'missing') return 'access token has no issue time (iat)';
    if (err.claim === 'iss')
      return `access token issued by ${shown(err.payload.iss ?? '(none)')}, not by this service (${shown(config.JWT_ISSUER)})`;
    if (err.claim === 'typ')
      return 'this is an OAuth access token for another resource (typ at+jwt), not a credential for this service';
    if (err.claim === 'nbf') return 'access token is not valid yet (nbf is in the future)';
    return `access token claim ${shown(err.claim)} is not valid`;
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed)
    return `access token is signed with another algorithm; this service signs and accepts only ${keys.algorithm}`;
  if (err instanceof joseErrors.JWSSignatureVerificationFailed)
    return "access token signature does not match this service's key (signed by another service, or tampered with)";
  return 'access token is malformed (not a signed JWT)';
}

/** jose's notion of the current time for `exp` and `nbf`: whole seconds, rounded down. */
const epochSeconds = (d: Date) => Math.floor(d.getTime() / 1000);

async function verifyToken(keys: JwtKeys, config: Config, token: string, now: Date): Promise<Verified> {
  let payload: Record<string, unknown>;
  let unknownKid: string | undefined;
  let keyLiveUntil = Number.POSITIVE_INFINITY;
  try {
    // The key named by the token's kid among those live now (a rotation publishes two). A token without
    // a kid, or with one we do not know (HBP, which signed with the same key, may have named it its own
    // way), is checked against the current key: the kid only chooses, the signature decides.
    const live = verifyingKeysAt(keys, now);
    const keyFor = (header: { kid?: string }) => {
      const found = header.kid === undefined ? undefined : live.find((k) => k.kid === header.kid);
      if (header.kid !== undefined && !found) unknownKid = header.kid;
      // A retired key is live until the rotation ends (for as long as it is configured, without an end).
      if (found && found.kid !== keys.kid)
        keyLiveUntil = keys.previousUntil?.getTime() ?? Number.POSITIVE_INFINITY;
      return found?.verifyCryptoKey ?? keys.verifyCryptoKey;
    };
    let protectedHeader: { typ?: string };
    ({ payload, protectedHeader } = await jwtVerify(token, keyFor, {
      algorithms: [keys.algorithm],
      issuer: config.JWT_ISSUER,
      currentDate: now,
      // A token without an expiry would be a credential for ever; the service never signs one. Without an
      // issue time its lifetime cannot be checked (below); the service's tokens, and HBP's, carry one.
      requiredClaims: ['exp', 'iat'],
    }));
    // The OAuth authorization server's tokens (RFC 9068, auth/oauth-server) may be signed with this same
    // key: they are for the resource servers they name, never a credential for this service's routes.
    if (
      protectedHeader.typ?.toLowerCase() === 'at+jwt' ||
      protectedHeader.typ?.toLowerCase() === 'application/at+jwt'
    )
      throw new joseErrors.JWTClaimValidationFailed('OAuth access token', payload, 'typ', 'check_failed');
  } catch (err) {
    const why =
      unknownKid !== undefined && err instanceof joseErrors.JWSSignatureVerificationFailed
        ? new UnknownKey(unknownKid)
        : err;
    throw new InvalidAccessToken(refusal(why, keys, config), { cause: err });
  }
  // jose has checked that exp and iat are present and numbers. A token that lives longer than the ones
  // this service signs was not signed by it: by a leaked or shared key, or before JWT_EXPIRES_IN was
  // lowered. An iat in the future would let such a token pass that check, so it is refused too.
  const { exp, nbf, iat } = payload as { exp: number; nbf?: number; iat: number };
  if (iat > epochSeconds(now) + LIFETIME_SKEW_S)
    throw new InvalidAccessToken('access token is issued in the future (iat)');
  const maxLifetimeS = config.JWT_EXPIRES_IN * 60;
  if (exp - iat > maxLifetimeS + LIFETIME_SKEW_S)
    throw new InvalidAccessToken(
      `access token lives longer (exp - iat: ${exp - iat} s) than this service's tokens (JWT_EXPIRES_IN: ${maxLifetimeS} s)`,
    );
  const claims = payload[config.JWT_CLAIMS_NAMESPACE];
  if (!claims || typeof claims !== 'object') throw new InvalidAccessToken('access token has no claims');
  const vars: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(claims as Record<string, unknown>)) {
    vars[k.startsWith('x-hasura-') ? k.slice('x-hasura-'.length) : k] = v;
  }
  if (
    typeof vars['user-id'] !== 'string' ||
    !Array.isArray(vars['allowed-roles']) ||
    typeof vars['default-role'] !== 'string'
  ) {
    throw new InvalidAccessToken('access token claims are incomplete');
  }
  // Every account's user id is a UUID; anything else (signed with a leaked or shared key, or by another
  // issuer of the same key) would reach the database as a malformed value and answer 500.
  if (!UUID.test(vars['user-id'])) throw new InvalidAccessToken('access token user-id is not a UUID');
  const sid = payload[SESSION_ID_CLAIM];
  if (sid !== undefined && (typeof sid !== 'string' || !UUID.test(sid)))
    throw new InvalidAccessToken('access token sid is not a UUID');
  factsByVars.set(vars as PermissionVariables, {
    userId: vars['user-id'],
    sessionId: sid,
    issuedAt: iat,
  });
  return {
    vars: vars as PermissionVariables,
    exp,
    nbf: typeof nbf === 'number' ? nbf : undefined,
    keyLiveUntil,
  };
}

/** Verifies a token and returns its un-prefixed permission variables; throws InvalidAccessToken. */
export async function verifyAccessToken(
  keys: JwtKeys,
  config: Config,
  token: string,
  now: Date,
): Promise<PermissionVariables> {
  return (await verifyToken(keys, config, token, now)).vars;
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/**
 * verifyAccessToken with a memory of tokens already verified, for the request path: a client sends the
 * same access token with every request, and the signature check and claim parsing were a sixth of a
 * metadata request's CPU. Only successes are kept, keyed by the whole token (signature included), so a
 * hit is a token byte-for-byte identical to one that passed the full check with this process's key,
 * algorithm and issuer. What can change with time is checked again on every hit: `exp` and `nbf` (with
 * jose's rounding and comparisons), and whether the key that verified the token is still live (a retired
 * key stops being accepted when its rotation ends; the keys themselves are fixed for the life of the
 * process, a new key set meaning a restart and a new verifier). A token that fails any of these is
 * dropped and goes through the full check, which gives the same error. The lifetime and `iat` checks
 * need no repeating: they compare the token with itself, and `iat` only grows older. A hit compares
 * numbers and allocates nothing.
 * The permission variables handed out are frozen, since every request presenting the token shares them.
 */
export class AccessTokenVerifier {
  private readonly verified = new Map<string, Verified>();

  constructor(
    private readonly keys: JwtKeys,
    private readonly config: Config,
    private readonly maxEntries = 10_000,
  ) {}

  async verify(token: string, now: Date): Promise<PermissionVariables> {
    const hit = this.verified.get(token);
    if (hit) {
      const t = epochSeconds(now);
      if (hit.exp > t && (hit.nbf === undefined || hit.nbf <= t) && now.getTime() < hit.keyLiveUntil)
        return hit.vars;
      this.verified.delete(token);
    }
    const v = await verifyToken(this.keys, this.config, token, now);
    deepFreeze(v.vars);
    if (this.verified.size >= this.maxEntries) {
      // Map iterates in insertion order: drop the oldest.
      const oldest = this.verified.keys().next();
      if (!oldest.done) this.verified.delete(oldest.value);
    }
    this.verified.set(token, v);
    return v.vars;
  }

  /** Entries held (tests). */
  get size(): number {
    return this.verified.size;
  }
}
