/**
 * Helpers of the authorization-server suites: the app with OAUTH_SERVER_ENABLED at a made-up issuer that
 * `oauth4webapi` (an independent client library) reaches through `app.inject`, a browser's cookies after a
 * real sign-in, and the browser's part of the authorization request (the consent form posted as a
 * browser posts it).
 */
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import * as oauth from 'oauth4webapi';
import { createClient } from '../../src/auth/oauth-server/clients.ts';
import { signUp } from '../auth/helpers.ts';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';
import type { DbKind } from '../helpers/db.ts';

export const ISSUER = 'http://gatehouse.test';
export const MCP = 'https://mcp.example.com/mcp';
export const OTHER_MCP = 'https://other.example.com/mcp';
export const REDIRECT = 'http://127.0.0.1:8976/callback';

export function buildOAuthApp(kind: DbKind, overrides: ConfigOverrides = {}): Promise<TestApp> {
  return buildTestApp(kind, {
    JWT_ALGORITHM: 'ES256',
    SERVER_URL: ISSUER,
    // The same issuer as the service's own tokens: the token type alone must keep them apart.
    JWT_ISSUER: ISSUER,
    OAUTH_SERVER_ENABLED: true,
    RATE_LIMIT_ENABLED: false,
    OAUTH_RESOURCES: [MCP, OTHER_MCP],
    ...overrides,
  });
}

/** A fetch that answers from the app for the issuer's origin, and refuses anything else. */
export function injectFetch(t: TestApp): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const req = input instanceof Request ? input : new Request(input, init);
    const url = new URL(req.url);
    if (url.origin !== ISSUER) throw new Error(`the test fetch reaches only ${ISSUER}, not ${url.origin}`);
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      headers[k] = v;
    });
    const body =
      req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.from(await req.arrayBuffer());
    const res = await t.app.inject({
      method: req.method as 'GET',
      url: url.pathname + url.search,
      headers,
      payload: body,
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers))
      if (v !== undefined) for (const x of Array.isArray(v) ? v : [String(v)]) out.append(k, x);
    return new Response(res.statusCode === 204 || res.statusCode === 304 ? null : res.rawPayload, {
      status: res.statusCode,
      headers: out,
    });
  }) as typeof fetch;
}

/** Options every oauth4webapi request of the suites takes. */
export function clientOptions(t: TestApp) {
  return { [oauth.customFetch]: injectFetch(t), [oauth.allowInsecureRequests]: true } as const;
}

export async function discover(t: TestApp): Promise<oauth.AuthorizationServer> {
  const issuer = new URL(ISSUER);
  const res = await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...clientOptions(t) });
  return oauth.processDiscoveryResponse(issuer, res);
}

export interface Browser {
  cookie: string;
  userId: string;
  email: string;
  password: string;
}

/** Cookie header of a response's cookies (values still signed, as a browser keeps them). */
export function cookieHeader(res: LightMyRequestResponse): string {
  return (res.cookies as { name: string; value: string }[])
    .filter((c) => c.value !== '')
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
}

/** A person signed in in a browser: registered, then signed in with cookies. */
export async function signedInBrowser(t: TestApp): Promise<Browser> {
  const who = await signUp(t);
  const res = await t.app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email: who.email, password: who.password, cookie: true },
  });
  assert.equal(res.statusCode, 200, res.body);
  return { cookie: cookieHeader(res), userId: who.userId, email: who.email, password: who.password };
}

export async function publicClient(t: TestApp, redirectUris = [REDIRECT]): Promise<string> {
  return (await createClient(t.ctx.db, { name: 'Test Agent', redirectUris, confidential: false }, 'operator'))
    .clientId;
}

export async function confidentialClient(t: TestApp): Promise<{ id: string; secret: string }> {
  const c = await createClient(
    t.ctx.db,
    { name: 'Resource Server', redirectUris: [REDIRECT], confidential: true },
    'operator',
  );
  return { id: c.clientId, secret: c.clientSecret as string };
}

export interface AuthorizeInput {
  clientId: string;
  redirectUri?: string;
  scope?: string;
  resources?: string[];
  state?: string;
  nonce?: string;
  challenge?: string;
  method?: string;
  extra?: Record<string, string>;
}

export function authorizeUrl(a: AuthorizeInput): string {
  const q = new URLSearchParams({ response_type: 'code', client_id: a.clientId });
  q.set('redirect_uri', a.redirectUri ?? REDIRECT);
  if (a.scope !== undefined) q.set('scope', a.scope);
  if (a.state !== undefined) q.set('state', a.state);
  if (a.nonce !== undefined) q.set('nonce', a.nonce);
  if (a.challenge !== undefined) q.set('code_challenge', a.challenge);
  if (a.method !== undefined) q.set('code_challenge_method', a.method);
  for (const r of a.resources ?? []) q.append('resource', r);
  for (const [k, v] of Object.entries(a.extra ?? {})) q.set(k, v);
  return `/auth/oauth2/authorize?${q}`;
}

/** The hidden fields of the consent form, by name (resource repeated). */
export function formFields(html: string): [string, string][] {
  const out: [string, string][] = [];
  const unesc = (s: string) =>
    s
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    out.push([unesc(m[1] as string), unesc(m[2] as string)]);
  return out;
}

/** Posts the consent form as the browser would (same origin), with `decision`. */
export async function postConsent(
  t: TestApp,
  cookie: string,
  fields: [string, string][],
  decision: 'allow' | 'deny' = 'allow',
  headers: Record<string, string> = { origin: ISSUER },
): Promise<LightMyRequestResponse> {
  const body = new URLSearchParams([...fields, ['decision', decision]]);
  return t.app.inject({
    method: 'POST',
    url: '/auth/oauth2/authorize',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers },
    payload: body.toString(),
  });
}

/**
 * The browser's part: the authorization request, the consent page (allowed) when shown, and the redirect
 * back to the client: its URL.
 */
export async function authorizeInBrowser(t: TestApp, browser: Browser, a: AuthorizeInput): Promise<URL> {
  const res = await t.app.inject({
    method: 'GET',
    url: authorizeUrl(a),
    headers: { cookie: browser.cookie },
  });
  if (res.statusCode === 302) return new URL(res.headers.location as string);
  assert.equal(res.statusCode, 200, res.body);
  assert.match(String(res.headers['content-type']), /text\/html/);
  const consent = await postConsent(t, browser.cookie, formFields(res.body));
  assert.equal(consent.statusCode, 303, consent.body);
  return new URL(consent.headers.location as string);
}

/** A full authorization-code flow with oauth4webapi: the token response. */
export async function fullFlow(
  t: TestApp,
  as: oauth.AuthorizationServer,
  browser: Browser,
  opts: { clientId: string; scope?: string; resources?: string[]; clientAuth?: oauth.ClientAuth } = {
    clientId: '',
  },
) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const back = await authorizeInBrowser(t, browser, {
    clientId: opts.clientId,
    scope: opts.scope ?? 'openid email',
    resources: opts.resources ?? [MCP],
    state,
    challenge: await oauth.calculatePKCECodeChallenge(verifier),
    method: 'S256',
  });
  const client: oauth.Client = { client_id: opts.clientId };
  const params = oauth.validateAuthResponse(as, client, back, state);
  const res = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    opts.clientAuth ?? oauth.None(),
    params,
    REDIRECT,
    verifier,
    clientOptions(t),
  );
  return { res, client, params, verifier, back };
}
