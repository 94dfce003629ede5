/**
 * OAuth 1.0a (RFC 5849), client side, for Twitter: HMAC-SHA1 request signing and the three steps
 * (request token, user authorization, access token). Twitter has no `state`: the request token plays
 * its part, and it is bound to the starting browser like a state (see flows/oauth.ts).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { AppError } from '../../errors.ts';
import { fieldsOf, invalidResponse, type ProviderHttp, providerRequest } from './http.ts';

/** RFC 5849 §3.6: unreserved characters stay, everything else is %XX (upper-case). */
export function percentEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export interface OAuth1Credentials {
  consumerKey: string;
  consumerSecret: string;
  token?: string;
  tokenSecret?: string;
}

/**
 * The `Authorization: OAuth …` header of a request (§3.5.1). `params` are the body's form fields;
 * the URL's own query parameters are signed too (§3.4.1.3).
 */
export function oauth1Header(
  method: string,
  url: string,
  creds: OAuth1Credentials,
  params: Record<string, string> = {},
  oauthExtra: Record<string, string> = {},
  opts: { nonce?: string; timestamp?: number } = {},
): string {
  const oauth: Record<string, string> = {
    oauth_consumer_key: creds.consumerKey,
    oauth_nonce: opts.nonce ?? randomBytes(16).toString('hex'),
    oauth_signature_method: 'HMAC-SHA1',
    oauth_timestamp: String(opts.timestamp ?? Math.floor(Date.now() / 1000)),
    oauth_version: '1.0',
    ...oauthExtra,
  };
  if (creds.token) oauth.oauth_token = creds.token;
  const u = new URL(url);
  const all: [string, string][] = [
    ...u.searchParams.entries(),
    ...Object.entries(params),
    ...Object.entries(oauth),
  ];
  const normalized = all
    .map(([k, v]) => [percentEncode(k), percentEncode(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  // §3.4.1.2: URL parses scheme and host to lower case and drops a default port.
  const baseUrl = `${u.protocol}//${u.host}${u.pathname}`;
  const base = [method.toUpperCase(), percentEncode(baseUrl), percentEncode(normalized)].join('&');
  const key = `${percentEncode(creds.consumerSecret)}&${percentEncode(creds.tokenSecret ?? '')}`;
  oauth.oauth_signature = createHmac('sha1', key).update(base).digest('base64');
  return `OAuth ${Object.entries(oauth)
    .map(([k, v]) => `${percentEncode(k)}="${percentEncode(v)}"`)
    .join(', ')}`;
}

async function signedPost(
  http: ProviderHttp,
  what: string,
  url: string,
  creds: OAuth1Credentials,
  oauthExtra: Record<string, string>,
): Promise<Record<string, unknown>> {
  const res = await providerRequest(http, what, url, {
    method: 'POST',
    headers: {
      authorization: oauth1Header('POST', url, creds, {}, oauthExtra),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: '',
  });
  if (res.status === 401 || res.status === 403)
    throw new AppError('PROVIDER_DENIED', 'The sign-in provider refused the request.');
  if (res.status !== 200) throw invalidResponse(`${what} (status ${res.status})`);
  return fieldsOf(res, what);
}

/** Step 1: a request token for a sign-in that comes back to `callback`. */
export async function requestToken(
  http: ProviderHttp,
  url: string,
  creds: OAuth1Credentials,
  callback: string,
): Promise<{ token: string; secret: string }> {
  const f = await signedPost(http, 'request token', url, creds, { oauth_callback: callback });
  // §2.1: a provider that did not take our callback would send the browser elsewhere.
  if (f.oauth_callback_confirmed !== 'true') throw invalidResponse('request token (callback not confirmed)');
  if (typeof f.oauth_token !== 'string' || typeof f.oauth_token_secret !== 'string' || f.oauth_token === '')
    throw invalidResponse('request token');
  return { token: f.oauth_token, secret: f.oauth_token_secret };
}

/** Step 3: the access token for an authorized request token and its verifier. */
export async function accessToken(
  http: ProviderHttp,
  url: string,
  creds: OAuth1Credentials,
  verifier: string,
): Promise<{ token: string; secret: string; fields: Record<string, unknown> }> {
  const f = await signedPost(http, 'access token', url, creds, { oauth_verifier: verifier });
  if (typeof f.oauth_token !== 'string' || typeof f.oauth_token_secret !== 'string' || f.oauth_token === '')
    throw invalidResponse('access token');
  return { token: f.oauth_token, secret: f.oauth_token_secret, fields: f };
}

/** A signed GET of a JSON resource (the profile). */
export async function signedGet(
  http: ProviderHttp,
  what: string,
  url: string,
  creds: OAuth1Credentials,
): Promise<Record<string, unknown>> {
  const res = await providerRequest(http, what, url, {
    headers: { authorization: oauth1Header('GET', url, creds), accept: 'application/json' },
  });
  if (res.status === 401 || res.status === 403)
    throw new AppError('PROVIDER_DENIED', `The sign-in provider refused to share the ${what}.`);
  if (res.status !== 200) throw invalidResponse(`${what} (status ${res.status})`);
  return fieldsOf(res, what);
}
