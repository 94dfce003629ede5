/**
 * OpenID Connect relying-party side: discovery of an issuer's endpoints and keys, and validation of the
 * ID token it returns (OpenID Connect Core §3.1.3.7): signature by a key of the issuer's JWKS with an
 * asymmetric algorithm the issuer announces, `iss` equal to the configured issuer, `aud` naming our client
 * (and `azp` when there are several audiences), `exp` not past and `iat` not ahead of our clock by more
 * than a minute (a token "issued" in the future would outlive its stated lifetime), and `nonce`
 * equal to the one this sign-in sent. Anything else is ID_TOKEN_INVALID: a token made for another client,
 * another sign-in, another issuer, or by someone without the issuer's key does not sign anyone in.
 */
import { createRemoteJWKSet, type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import { secretsEqual } from '../../constant-time.ts';
import { AppError } from '../../errors.ts';
import { invalidResponse, jsonObject, type ProviderHttp, providerRequest, unavailable } from './http.ts';

export interface OidcMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  userinfo_endpoint?: string;
  code_challenge_methods_supported?: string[];
  token_endpoint_auth_methods_supported?: string[];
  id_token_signing_alg_values_supported?: string[];
}

/** How long a discovery document is trusted before it is read again. */
const METADATA_TTL_MS = 60 * 60 * 1000;
/** Signature algorithms accepted for ID tokens: asymmetric only (an HMAC key would be our client secret). */
const ASYMMETRIC = /^(RS|PS|ES)(256|384|512)$|^EdDSA$|^Ed25519$/;

type KeySet = ReturnType<typeof createRemoteJWKSet>;

/** An issuer's discovery document and key set, read on first use and cached for METADATA_TTL_MS. */
export class OidcIssuer {
  private cached: { at: number; metadata: OidcMetadata; keys: KeySet } | undefined;
  private pending: Promise<{ metadata: OidcMetadata; keys: KeySet }> | undefined;

  constructor(
    readonly issuer: string,
    private readonly http: ProviderHttp,
    private readonly opts: { requireHttps: boolean; now: () => number },
  ) {}

  async discover(): Promise<{ metadata: OidcMetadata; keys: KeySet }> {
    const now = this.opts.now();
    if (this.cached && now - this.cached.at < METADATA_TTL_MS) return this.cached;
    this.pending ??= this.fetchMetadata().finally(() => {
      this.pending = undefined;
    });
    const found = await this.pending;
    this.cached = { at: now, ...found };
    return found;
  }

  private async fetchMetadata(): Promise<{ metadata: OidcMetadata; keys: KeySet }> {
    const url = `${this.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const res = await providerRequest(this.http, 'discovery document', url, {
      headers: { accept: 'application/json' },
    });
    if (res.status !== 200) throw unavailable(`discovery document: status ${res.status}`);
    const doc = jsonObject(res, 'discovery document');
    // OpenID Connect Discovery §4.3: the document must name exactly the issuer it was fetched for, or a
    // document planted elsewhere could name another issuer's keys.
    if (doc.issuer !== this.issuer) throw invalidResponse('discovery document (issuer does not match)');
    const endpoint = (name: string, required: boolean): string | undefined => {
      const v = doc[name];
      if (v === undefined && !required) return undefined;
      if (typeof v !== 'string' || !this.urlAllowed(v)) throw invalidResponse(`discovery document (${name})`);
      return v;
    };
    const strings = (name: string): string[] | undefined => {
      const v = doc[name];
      return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
    };
    const metadata: OidcMetadata = {
      issuer: this.issuer,
      authorization_endpoint: endpoint('authorization_endpoint', true) as string,
      token_endpoint: endpoint('token_endpoint', true) as string,
      jwks_uri: endpoint('jwks_uri', true) as string,
      userinfo_endpoint: endpoint('userinfo_endpoint', false),
      code_challenge_methods_supported: strings('code_challenge_methods_supported'),
      token_endpoint_auth_methods_supported: strings('token_endpoint_auth_methods_supported'),
      id_token_signing_alg_values_supported: strings('id_token_signing_alg_values_supported'),
    };
    const keys = createRemoteJWKSet(new URL(metadata.jwks_uri), {
      timeoutDuration: this.http.timeoutMs,
      headers: { 'user-agent': 'Gatehouse' },
    });
    return { metadata, keys };
  }

  private urlAllowed(v: string): boolean {
    try {
      const u = new URL(v);
      return u.protocol === 'https:' || (!this.opts.requireHttps && u.protocol === 'http:');
    } catch {
      return false;
    }
  }
}

/** PKCE is sent unless the issuer lists the methods it supports and S256 is not among them. */
export function issuerSupportsPkce(metadata: OidcMetadata): boolean {
  const methods = metadata.code_challenge_methods_supported;
  return methods === undefined || methods.includes('S256');
}

/** client_secret_basic unless the issuer lists its methods without it (then client_secret_post). */
export function tokenAuthMethod(metadata: OidcMetadata): 'basic' | 'post' {
  const methods = metadata.token_endpoint_auth_methods_supported;
  if (methods === undefined || methods.includes('client_secret_basic')) return 'basic';
  return 'post';
}

export interface IdTokenExpectations {
  issuer: string;
  clientId: string;
  nonce: string;
  now: Date;
  /** Algorithms the issuer announces; RS256 when it announces none (OpenID Connect Discovery §3). */
  algorithms?: readonly string[];
}

/** How far the issuer's clock may be from ours, in seconds. */
const CLOCK_SKEW_SECONDS = 60;

function invalidIdToken(reason: string, cause?: unknown): AppError {
  return new AppError(
    'ID_TOKEN_INVALID',
    `The provider's ID token is not valid for this sign-in: ${reason}.`,
    {
      cause,
    },
  );
}

/** Validates an ID token and returns its claims; ID_TOKEN_INVALID (or PROVIDER_UNAVAILABLE) otherwise. */
export async function validateIdToken(
  token: string,
  keys: KeySet,
  expect: IdTokenExpectations,
): Promise<JWTPayload & { sub: string }> {
  const algorithms = (expect.algorithms?.length ? expect.algorithms : ['RS256']).filter((a) =>
    ASYMMETRIC.test(a),
  );
  if (algorithms.length === 0) throw invalidIdToken('the issuer announces no asymmetric signature algorithm');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keys, {
      issuer: expect.issuer,
      audience: expect.clientId,
      algorithms,
      currentDate: expect.now,
      clockTolerance: CLOCK_SKEW_SECONDS,
      requiredClaims: ['sub', 'iat', 'exp'],
    }));
  } catch (err) {
    throw idTokenError(err);
  }
  // jose checks `iat` only against a maximum age; a token dated ahead of the skew was not issued now.
  if ((payload.iat as number) > expect.now.getTime() / 1000 + CLOCK_SKEW_SECONDS)
    throw invalidIdToken('it was issued in the future (iat)');
  // Core §3.1.3.7 (4, 5): a token for several audiences must say it was issued to us.
  if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== expect.clientId)
    throw invalidIdToken('it names several audiences and its azp is not this client');
  if (payload.azp !== undefined && payload.azp !== expect.clientId)
    throw invalidIdToken('it was issued to another client (azp)');
  // Core §3.1.3.7 (11): the nonce ties the token to the browser that started this sign-in.
  if (typeof payload.nonce !== 'string' || !secretsEqual(payload.nonce, expect.nonce))
    throw invalidIdToken('its nonce is not the one this sign-in sent');
  if (typeof payload.sub !== 'string' || payload.sub === '') throw invalidIdToken('it has no subject');
  return payload as JWTPayload & { sub: string };
}

function idTokenError(err: unknown): AppError {
  if (err instanceof joseErrors.JWTExpired) return invalidIdToken('it has expired', err);
  if (err instanceof joseErrors.JWTClaimValidationFailed)
    return invalidIdToken(`its "${err.claim}" claim is not valid (${err.reason})`, err);
  if (err instanceof joseErrors.JWSSignatureVerificationFailed)
    return invalidIdToken('its signature does not verify with the issuer\u2019s keys', err);
  if (err instanceof joseErrors.JWKSNoMatchingKey)
    return invalidIdToken('it is signed by a key the issuer does not publish', err);
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return invalidIdToken('its algorithm is not allowed', err);
  if (err instanceof joseErrors.JWKSTimeout) return unavailable('key set', err);
  // The key set could not be read: for a non-200 or non-JSON answer jose raises its generic error, and
  // only there (every check of a token has its own subclass, with its own code).
  if (err instanceof joseErrors.JOSEError && err.code === joseErrors.JOSEError.code)
    return unavailable('key set', err);
  if (err instanceof joseErrors.JOSEError) return invalidIdToken(`it cannot be verified (${err.code})`, err);
  // A failed fetch of the key set.
  return unavailable('key set', err);
}
