/**
 * OAuth 2.0 authorization-code flow, client side (RFC 6749 §4.1, PKCE RFC 7636): the authorization URL
 * and the exchange of the code for tokens.
 */
import { createHash, randomBytes } from 'node:crypto';
import { AppError } from '../../errors.ts';
import { fieldsOf, invalidResponse, type ProviderHttp, providerRequest } from './http.ts';

/** A random value for `state`, `nonce` or a PKCE verifier: 256 bits, base64url (43 characters). */
export function randomValue(): string {
  return randomBytes(32).toString('base64url');
}

/** The S256 code challenge of a PKCE verifier. */
export function pkceChallenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** `endpoint` with `params` added to its query (a configured endpoint may carry its own). */
export function withQuery(endpoint: string, params: Record<string, string | undefined>): string {
  const u = new URL(endpoint);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

export interface TokenSet {
  access_token: string;
  token_type?: string;
  refresh_token?: string;
  id_token?: string;
  scope?: string;
  /** Seconds. */
  expires_in?: number;
}

export interface CodeExchange {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  /** How the client authenticates: HTTP Basic (RFC 6749 §2.3.1) or in the body. */
  auth: 'basic' | 'post';
  code: string;
  redirectUri: string;
  codeVerifier?: string;
}

/** Form-encoding of the client credentials before Basic, as RFC 6749 §2.3.1 asks. */
const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');

/** Exchanges an authorization code; PROVIDER_DENIED when the provider refuses it. */
export async function exchangeCode(http: ProviderHttp, x: CodeExchange): Promise<TokenSet> {
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code: x.code,
    redirect_uri: x.redirectUri,
  });
  if (x.codeVerifier) body.set('code_verifier', x.codeVerifier);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  if (x.auth === 'basic') {
    const pair = `${formEncode(x.clientId)}:${formEncode(x.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
  } else {
    body.set('client_id', x.clientId);
    body.set('client_secret', x.clientSecret);
  }
  const res = await providerRequest(http, 'token response', x.tokenUrl, {
    method: 'POST',
    headers,
    body: body.toString(),
  });
  const fields = fieldsOf(res, 'token response');
  // GitHub answers a refused code with 200 and an `error` field.
  if (res.status !== 200 || fields.error !== undefined) {
    if (res.status === 200 || res.status === 400 || res.status === 401)
      throw new AppError('PROVIDER_DENIED', 'The sign-in provider refused the authorization code.');
    throw invalidResponse(`token response (status ${res.status})`);
  }
  if (typeof fields.access_token !== 'string' || fields.access_token === '')
    throw invalidResponse('token response (no access_token)');
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const expires = Number(fields.expires_in);
  return {
    access_token: fields.access_token,
    token_type: str(fields.token_type),
    refresh_token: str(fields.refresh_token),
    id_token: str(fields.id_token),
    scope: str(fields.scope),
    expires_in: Number.isFinite(expires) && expires > 0 ? expires : undefined,
  };
}
