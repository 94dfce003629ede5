/**
 * The authorization request (GET /auth/oauth2/authorize) and the consent that answers it. Checked in two
 * stages: until the client and its redirect URI are known good, a problem is shown on a page and nothing
 * is sent anywhere (no open redirect); after that, problems go back to the client's redirect URI as
 * RFC 6749 §4.1.2.1 errors. The consent form carries a token bound to the person's session and to the
 * exact request, so a form made for one session, or for another request, is refused.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { secretsEqual } from '../../constant-time.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { sha256Hex } from '../secrets.ts';
import { findSessionToken } from '../sessions-store.ts';
import { type OAuthClient, redirectUriAllowed, resolveClient, UnknownClient } from './clients.ts';
import { CODE_LIFETIME_S, issuerOf, type OAuthServerDeps, SCOPES } from './deps.ts';
import { findConsent, insertCode, purgeCodes, sessionStands, upsertConsent } from './store.ts';

/** The query of an authorization request, as received (every parameter a string or absent). */
export interface AuthorizeParams {
  response_type?: string;
  client_id?: string;
  redirect_uri?: string;
  scope?: string;
  state?: string;
  code_challenge?: string;
  code_challenge_method?: string;
  nonce?: string;
  /** RFC 8707: zero or more. */
  resource?: string | string[];
}

/** A request whose client and redirect URI are trusted, and whose other parameters are checked. */
export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  scopes: string[];
  resources: string[];
  state: string | undefined;
  codeChallenge: string;
  nonce: string | undefined;
}

/** An error to send back to the (trusted) redirect URI. */
export class RedirectError extends Error {
  constructor(
    readonly redirectUri: string,
    readonly error: string,
    readonly description: string,
    readonly state: string | undefined,
  ) {
    super(description);
  }
}

/** The page error: the request cannot be answered at its redirect URI. */
function pageError(why: string): AppError {
  return new AppError('OAUTH_REQUEST_INVALID', `This authorization request cannot be served: ${why}.`);
}

const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

const asList = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v : [v];

/** Whether `resource` may be asked for: OAUTH_RESOURCES when set, else https (loopback http outside production). */
export function resourceAllowed(config: OAuthServerDeps['config'], resource: string): boolean {
  let u: URL;
  try {
    u = new URL(resource);
  } catch {
    return false;
  }
  if (u.hash || resource.includes('#')) return false;
  if (config.OAUTH_RESOURCES.length > 0) return config.OAUTH_RESOURCES.includes(resource);
  if (u.protocol === 'https:') return true;
  return (
    u.protocol === 'http:' &&
    !config.isProduction &&
    (u.hostname === '127.0.0.1' || u.hostname === 'localhost' || u.hostname === '[::1]')
  );
}

/** Checks an authorization request; throws AppError (a page) or RedirectError. */
export async function checkAuthorizeRequest(
  deps: OAuthServerDeps,
  q: AuthorizeParams,
): Promise<AuthorizationRequest> {
  let client: OAuthClient;
  try {
    client = await resolveClient(deps, q.client_id ?? '');
  } catch (err) {
    if (err instanceof UnknownClient) throw pageError(`the client_id is not usable (${err.message})`);
    throw err;
  }
  if (q.redirect_uri === undefined) {
    // Only a client with a single redirect URI may leave it out (RFC 6749 §3.1.2.3).
    if (client.redirectUris.length !== 1) throw pageError('redirect_uri is missing');
  } else if (!redirectUriAllowed(client, q.redirect_uri)) {
    throw pageError('the redirect_uri is not one the client registered');
  }
  const redirectUri = q.redirect_uri ?? (client.redirectUris[0] as string);
  const fail = (error: string, description: string) =>
    new RedirectError(redirectUri, error, description, q.state);

  if (q.response_type !== 'code')
    throw fail('unsupported_response_type', 'only response_type=code is supported');
  // OAuth 2.1: PKCE is required, and only S256 (plain would hand the verifier to whoever sees the URL).
  if (q.code_challenge === undefined) throw fail('invalid_request', 'code_challenge is required (PKCE)');
  if (q.code_challenge_method !== 'S256') throw fail('invalid_request', 'code_challenge_method must be S256');
  if (!CHALLENGE.test(q.code_challenge))
    throw fail('invalid_request', 'code_challenge is not a base64url SHA-256 digest');
  const scopes = [...new Set((q.scope ?? '').split(' ').filter((s) => s !== ''))];
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) throw fail('invalid_scope', `unknown scope: ${unknown.join(' ').slice(0, 200)}`);
  const resources = [...new Set(asList(q.resource))];
  for (const r of resources)
    if (!resourceAllowed(deps.config, r))
      throw fail('invalid_target', 'a resource is not one this server issues tokens for');
  if (q.nonce !== undefined && q.nonce.length > 512) throw fail('invalid_request', 'nonce is too long');
  return {
    client,
    redirectUri,
    scopes,
    resources: resources.sort(),
    state: q.state,
    codeChallenge: q.code_challenge,
    nonce: q.nonce,
  };
}

/** The redirect URI with the response parameters, and `iss` (RFC 9207: mix-up protection). */
export function redirectWith(
  deps: OAuthServerDeps,
  redirectUri: string,
  params: Record<string, string | undefined>,
): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  u.searchParams.set('iss', issuerOf(deps.config));
  return u.href;
}

/** The consent form's token: an HMAC of the session and of the exact request, so it fits only both. */
export function consentToken(deps: OAuthServerDeps, sessionId: string, r: AuthorizationRequest): string {
  const request = JSON.stringify([
    r.client.id,
    r.redirectUri,
    r.scopes,
    r.resources,
    r.codeChallenge,
    r.state ?? null,
    r.nonce ?? null,
  ]);
  return createHmac('sha256', deps.cookieSecret)
    .update(`gatehouse oauth consent\n${sessionId}\n${request}`)
    .digest('base64url');
}

export function consentTokenValid(
  deps: OAuthServerDeps,
  sessionId: string,
  r: AuthorizationRequest,
  presented: string | undefined,
): boolean {
  return presented !== undefined && secretsEqual(presented, consentToken(deps, sessionId, r));
}

/** Whether the person already allowed this client these scopes and resources (or more). */
export async function consentCovers(
  deps: OAuthServerDeps,
  accountId: string,
  r: AuthorizationRequest,
): Promise<boolean> {
  const c = await findConsent(deps.db, accountId, r.client.id);
  if (!c) return false;
  return r.scopes.every((s) => c.scopes.includes(s)) && r.resources.every((x) => c.resources.includes(x));
}

export interface SignedInSession {
  accountId: string;
  sessionId: string;
  signedInAt: Date | null;
}

/**
 * Issues the code (and records the consent, when `consented`): the redirect URI to send the browser to.
 * The code is single use, lives CODE_LIFETIME_S seconds and is bound to the client, redirect URI, PKCE
 * challenge, scopes and resources; only its hash is stored.
 */
export async function issueCode(
  deps: OAuthServerDeps,
  session: SignedInSession,
  r: AuthorizationRequest,
  consented: boolean,
  client?: EventClient,
): Promise<{ location: string; consentCreated: boolean }> {
  const now = deps.clock.now();
  const code = randomBytes(32).toString('base64url');
  let consentCreated = false;
  await deps.db.transaction(async (tx) => {
    if (consented)
      consentCreated = await upsertConsent(
        tx,
        {
          accountId: session.accountId,
          clientId: r.client.id,
          clientName: r.client.name,
          scopes: r.scopes,
          resources: r.resources,
        },
        now,
      );
    if (consentCreated)
      await recordEvent(deps, tx, {
        type: 'oauth_grant_created',
        accountId: session.accountId,
        sessionId: session.sessionId,
        client: client ?? null,
        details: {
          client_id: r.client.id,
          client_name: r.client.name,
          scopes: r.scopes,
          resources: r.resources,
        },
      });
    // Codes are kept a day after they expire, so that a replayed one still ends what it issued; older
    // ones go here, a cheap indexed delete.
    await purgeCodes(tx, new Date(now.getTime() - 24 * 3600_000));
    await insertCode(tx, {
      code_hash: sha256Hex(code),
      family_id: randomUUID(),
      client_id: r.client.id,
      account_id: session.accountId,
      session_id: session.sessionId,
      redirect_uri: r.redirectUri,
      code_challenge: r.codeChallenge,
      scopes: r.scopes,
      resources: r.resources,
      nonce: r.nonce ?? null,
      auth_time: session.signedInAt,
      created_at: now,
      expires_at: new Date(now.getTime() + CODE_LIFETIME_S * 1000),
    });
  });
  return { location: redirectWith(deps, r.redirectUri, { code, state: r.state }), consentCreated };
}

/**
 * The sign-in behind the browser's refresh cookie, when it still stands: the cookie's token is the
 * latest of its session (a rotated one means the browser has lost track), unexpired, and the session
 * not ended.
 */
export async function currentSession(
  deps: OAuthServerDeps,
  presented: string | undefined,
): Promise<SignedInSession | undefined> {
  if (presented === undefined) return undefined;
  const now = deps.clock.now();
  const row = await findSessionToken(deps.db, sha256Hex(presented));
  if (!row || row.rotated_at !== null || row.expires_at.getTime() <= now.getTime()) return undefined;
  if (!(await sessionStands(deps.db, row.family_id, now))) return undefined;
  return { accountId: row.account_id, sessionId: row.family_id, signedInAt: row.signed_in_at };
}
