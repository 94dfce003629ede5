/**
 * Sign-in with OAuth and OpenID Connect providers (contract §5, with HBP's defects D11 fixed).
 *
 * - **Start** (`GET /auth/providers/<p>`): a random `state` (OAuth 1.0a: the request token), a PKCE
 *   verifier where the provider supports it and, for OpenID Connect, a `nonce` are remembered in
 *   auth.provider_requests together with the SHA-256 of a random value kept in the browser's signed
 *   cookie. Only that browser can finish the sign-in, only once, within PROVIDER_STATE_EXPIRES_IN.
 * - **Callback**: the request is used up (only by the browser that started it) before anything else,
 *   then the code is exchanged (with the verifier), an ID token is validated in full (oauth/oidc.ts) and
 *   the profile is read.
 * - **Account**: a known (provider, subject) signs in its account; a signed-in user's start links the
 *   identity to their account; an unknown identity whose email belongs to an account is linked to it
 *   only when the provider vouches for the email (otherwise PROVIDER_EMAIL_NOT_VERIFIED and nothing
 *   changes) and the account's own address was proven (otherwise PROVIDER_EMAIL_IN_USE: its owner signs
 *   in the usual way and links from there; a pending account is completed with the provider's proof
 *   and keeps nothing its registrants chose); else a new account is made, holding the email only when
 *   it is vouched for (an address nobody proved must not reserve the address, or let its real owner
 *   later share the account with whoever made it), and recorded as proven by that provider. All of it
 *   happens in one transaction with the session or the MFA ticket.
 */
import { secretsEqual } from '../../constant-time.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { assertEmailDomain, callerAccount } from '../accounts.ts';
import { type AccountRow, findAccountById, insertAccount, lockAccountByEmail } from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import { SecretBox, SecretBoxError } from '../mfa/secret-box.ts';
import { getWithToken, invalidResponse, jsonObject, type ProviderHttp } from '../oauth/http.ts';
import {
  accountLinks,
  deleteLink,
  deleteLinkTokens,
  findAccountByIdentity,
  findLinkTokens,
  insertLink,
  type LinkConflict,
  lockAccount,
  saveLinkTokens,
} from '../oauth/links-store.ts';
import * as oauth1 from '../oauth/oauth1.ts';
import { exchangeCode, pkceChallenge, randomValue, type TokenSet, withQuery } from '../oauth/oauth2.ts';
import { issuerSupportsPkce, OidcIssuer, tokenAuthMethod, validateIdToken } from '../oauth/oidc.ts';
import {
  enabledProviders,
  type OAuth1Provider,
  type OAuth2Provider,
  type OidcProvider,
  oidcProfile,
  type Provider,
  type ProviderName,
  type ProviderProfile,
  subjectOf,
} from '../oauth/providers.ts';
import {
  consumeProviderRequest,
  insertProviderRequest,
  type ProviderRequest,
} from '../oauth/requests-store.ts';
import { assertReauthenticated, type Reauthentication } from '../reauth.ts';
import { sha256Hex } from '../secrets.ts';
import { issueSession, type OwnSignIn, type Session } from '../sessions.ts';
import { issueTicket } from '../tickets-store.ts';
import { chooseRoles, completeRegistration } from './registration.ts';

/** The enabled providers with their discovery caches; one per app. */
export class ProviderRegistry {
  readonly providers: Map<ProviderName, Provider>;
  readonly http: ProviderHttp;
  private readonly issuers = new Map<ProviderName, OidcIssuer>();

  constructor(ctx: Pick<AuthDeps, 'config' | 'clock'>) {
    this.providers = enabledProviders(ctx.config);
    this.http = { timeoutMs: ctx.config.PROVIDER_REQUEST_TIMEOUT };
    for (const p of this.providers.values()) {
      if (p.kind === 'oidc')
        this.issuers.set(
          p.name,
          new OidcIssuer(p.issuer, this.http, {
            requireHttps: ctx.config.isProduction,
            now: () => ctx.clock.now().getTime(),
          }),
        );
    }
  }

  get(name: string): Provider | undefined {
    return this.providers.get(name as ProviderName);
  }

  issuer(p: OidcProvider): OidcIssuer {
    return this.issuers.get(p.name) as OidcIssuer;
  }
}

/** The auth dependencies plus the provider registry and the box that seals provider tokens. */
export interface OAuthDeps extends AuthDeps {
  readonly registry: ProviderRegistry;
  readonly box: SecretBox;
}

/** The URL registered with each provider as its redirect (callback) URL. */
export function callbackUrl(deps: Pick<AuthDeps, 'config'>, provider: ProviderName): string {
  return `${deps.config.SERVER_URL.replace(/\/+$/, '')}/auth/providers/${provider}/callback`;
}

export interface StartInput {
  provider: Provider;
  /** The random value of the browser's binding cookie. */
  binding: string;
  redirectTo?: string;
  useCookie: boolean;
  /** A signed-in user linking the provider to their account, with the proof of a recent sign-in. */
  link?: { userId: string; reauth: Reauthentication };
}

/** Starts a sign-in: remembers it and returns the provider URL the browser is sent to. */
export async function startProviderSignIn(deps: OAuthDeps, input: StartInput): Promise<string> {
  const { provider } = input;
  let linkAccountId: string | undefined;
  if (input.link) {
    // Linking adds a way into the account: a bearer token alone must not be enough (auth/reauth.ts).
    const account = await callerAccount(deps, input.link.userId);
    await assertReauthenticated(deps, account, input.link.reauth);
    linkAccountId = account.id;
  }
  const now = deps.clock.now();
  const redirectUri = callbackUrl(deps, provider.name);
  const base = {
    provider: provider.name,
    binding: input.binding,
    redirectTo: input.redirectTo,
    useCookie: input.useCookie,
    linkAccountId,
    createdAt: now,
    expiresAt: new Date(now.getTime() + deps.config.PROVIDER_STATE_EXPIRES_IN * 60_000),
  };
  if (provider.kind === 'oauth1') {
    const rt = await oauth1.requestToken(
      deps.registry.http,
      provider.requestTokenUrl,
      oauth1Creds(provider),
      redirectUri,
    );
    await insertProviderRequest(deps.db, { ...base, key: rt.token, requestTokenSecret: rt.secret });
    return withQuery(provider.authorizationUrl, { oauth_token: rt.token });
  }
  const state = randomValue();
  let authorizationUrl: string;
  let pkce: boolean;
  let nonce: string | undefined;
  if (provider.kind === 'oidc') {
    const { metadata } = await deps.registry.issuer(provider).discover();
    authorizationUrl = metadata.authorization_endpoint;
    pkce = issuerSupportsPkce(metadata);
    nonce = randomValue();
  } else {
    authorizationUrl = provider.authorizationUrl;
    pkce = provider.pkce;
  }
  const codeVerifier = pkce ? randomValue() : undefined;
  await insertProviderRequest(deps.db, { ...base, key: state, codeVerifier, nonce });
  return withQuery(authorizationUrl, {
    response_type: 'code',
    client_id: provider.clientId,
    redirect_uri: redirectUri,
    scope: provider.scope,
    state,
    nonce,
    code_challenge: codeVerifier ? pkceChallenge(codeVerifier) : undefined,
    code_challenge_method: codeVerifier ? 'S256' : undefined,
    response_mode: provider.responseMode === 'form_post' ? 'form_post' : undefined,
  });
}

function oauth1Creds(p: OAuth1Provider, token?: { token: string; secret: string }): oauth1.OAuth1Credentials {
  return {
    consumerKey: p.consumerKey,
    consumerSecret: p.consumerSecret,
    token: token?.token,
    tokenSecret: token?.secret,
  };
}

/** The enabled provider of that name; 404 for a disabled or unknown one. */
export function enabledProvider(deps: Pick<OAuthDeps, 'registry'>, name: string): Provider {
  const p = deps.registry.get(name);
  if (!p) throw new AppError('NOT_FOUND');
  return p;
}

/** The outcome of a callback: a session, or the MFA step for an account with a second factor. */
export type ProviderOutcome =
  | { kind: 'session'; session: Session; redirectTo?: string; useCookie: boolean }
  | { kind: 'mfa'; ticket: string; redirectTo?: string; useCookie: boolean };

function stateInvalid(): AppError {
  return new AppError('PROVIDER_STATE_INVALID');
}

/**
 * Uses up the sign-in named by the callback's `state` (or OAuth 1.0a request token), when this browser
 * started it; a state from another browser is refused without being used up. A forged, unknown, reused,
 * expired or other-browser state is PROVIDER_STATE_INVALID.
 */
async function claimRequest(
  deps: OAuthDeps,
  provider: Provider,
  params: Record<string, string>,
  binding: string | undefined,
): Promise<ProviderRequest> {
  // OAuth 1.0a: the request token comes back as oauth_token, or as `denied` when the person refused.
  const key = provider.kind === 'oauth1' ? (params.oauth_token ?? params.denied) : params.state;
  if (!key || !binding) throw stateInvalid();
  const request = await consumeProviderRequest(deps.db, key, provider.name, binding, deps.clock.now());
  // The statement matched the binding already; checked again here so that the rule lives in this file.
  if (!request || !secretsEqual(request.bindingHash, sha256Hex(binding))) throw stateInvalid();
  return request;
}

/** What the callback learnt from the provider. */
interface Identity {
  profile: ProviderProfile;
  tokens: StoredTokens;
}

/** Provider tokens as stored (sealed) and returned by GET /auth/providers/<p>/tokens. */
export interface StoredTokens {
  access_token: string;
  token_type?: string;
  refresh_token?: string;
  id_token?: string;
  scope?: string;
  /** ISO instant the access token expires, when the provider said. */
  expires_at?: string;
  /** OAuth 1.0a only: the token secret that signs requests with access_token. */
  token_secret?: string;
}

function storedTokens(t: TokenSet, now: Date): StoredTokens {
  return {
    access_token: t.access_token,
    token_type: t.token_type,
    refresh_token: t.refresh_token,
    id_token: t.id_token,
    scope: t.scope,
    expires_at: t.expires_in ? new Date(now.getTime() + t.expires_in * 1000).toISOString() : undefined,
  };
}

async function oauth2Identity(
  deps: OAuthDeps,
  p: OAuth2Provider,
  request: ProviderRequest,
  code: string,
): Promise<Identity> {
  const tokens = await exchangeCode(deps.registry.http, {
    tokenUrl: p.tokenUrl,
    clientId: p.clientId,
    clientSecret: p.clientSecret,
    auth: p.tokenAuth,
    code,
    redirectUri: callbackUrl(deps, p.name),
    codeVerifier: request.codeVerifier ?? undefined,
  });
  return {
    profile: await p.profile(deps.registry.http, tokens),
    tokens: storedTokens(tokens, deps.clock.now()),
  };
}

async function oidcIdentity(
  deps: OAuthDeps,
  p: OidcProvider,
  request: ProviderRequest,
  params: Record<string, string>,
): Promise<Identity> {
  const { metadata, keys } = await deps.registry.issuer(p).discover();
  const now = deps.clock.now();
  const tokens = await exchangeCode(deps.registry.http, {
    tokenUrl: metadata.token_endpoint,
    clientId: p.clientId,
    clientSecret: await p.clientSecret(now),
    auth: p.name === 'apple' ? 'post' : tokenAuthMethod(metadata),
    code: params.code as string,
    redirectUri: callbackUrl(deps, p.name),
    codeVerifier: request.codeVerifier ?? undefined,
  });
  if (!tokens.id_token) throw new AppError('ID_TOKEN_INVALID', 'The provider returned no ID token.');
  const claims: Record<string, unknown> = await validateIdToken(tokens.id_token, keys, {
    issuer: p.issuer,
    clientId: p.clientId,
    nonce: request.nonce ?? '',
    now,
    algorithms: metadata.id_token_signing_alg_values_supported,
  });
  if (p.userinfo && metadata.userinfo_endpoint)
    await addUserinfo(deps, metadata.userinfo_endpoint, tokens, claims);
  if (p.name === 'apple') addAppleName(claims, params.user);
  return { profile: oidcProfile(p, claims), tokens: storedTokens(tokens, now) };
}

/**
 * Completes the ID token's claims with the userinfo endpoint's (Core §5.3). Its `sub` must be the ID
 * token's (§5.3.2). The email and email_verified are taken as a pair from the same source.
 */
async function addUserinfo(
  deps: OAuthDeps,
  url: string,
  tokens: TokenSet,
  claims: Record<string, unknown>,
): Promise<void> {
  const info = jsonObject(
    await getWithToken(deps.registry.http, 'userinfo', url, tokens.access_token),
    'userinfo',
  );
  if (info.sub !== claims.sub) throw invalidResponse('userinfo (another subject)');
  const fromInfo = claims.email === undefined && typeof info.email === 'string';
  for (const [k, v] of Object.entries(info)) {
    if (k === 'email' || k === 'email_verified') continue;
    if (claims[k] === undefined) claims[k] = v;
  }
  if (fromInfo) {
    claims.email = info.email;
    claims.email_verified = info.email_verified;
  }
}

/** Apple sends the name once, in the first callback's `user` field (JSON), not in the ID token. */
function addAppleName(claims: Record<string, unknown>, user: string | undefined): void {
  if (!user) return;
  try {
    const parsed = JSON.parse(user) as { name?: { firstName?: unknown; lastName?: unknown } };
    if (typeof parsed.name?.firstName === 'string') claims.given_name ??= parsed.name.firstName;
    if (typeof parsed.name?.lastName === 'string') claims.family_name ??= parsed.name.lastName;
  } catch {
    // Not JSON: no name.
  }
}

async function oauth1Identity(
  deps: OAuthDeps,
  p: OAuth1Provider,
  request: ProviderRequest,
  params: Record<string, string>,
): Promise<Identity> {
  const verifier = params.oauth_verifier;
  if (!verifier) throw new AppError('PROVIDER_DENIED');
  const http = deps.registry.http;
  const requestToken = { token: params.oauth_token as string, secret: request.requestTokenSecret ?? '' };
  const access = await oauth1.accessToken(http, p.accessTokenUrl, oauth1Creds(p, requestToken), verifier);
  const profile = await oauth1.signedGet(http, 'profile', p.profileUrl, oauth1Creds(p, access));
  const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
  const id = text(profile.id_str) ?? (typeof profile.id === 'number' ? String(profile.id) : null);
  if (id === null)
    throw new AppError(
      'PROVIDER_RESPONSE_INVALID',
      'The sign-in provider answered an invalid profile (no id).',
    );
  return {
    profile: {
      subject: id,
      email: text(profile.email),
      // Twitter does not say in its answer whether the address was confirmed.
      emailVerified: false,
      displayName: text(profile.name) ?? text(profile.screen_name),
      avatarUrl: text(profile.profile_image_url_https),
    },
    tokens: { access_token: access.token, token_secret: access.secret },
  };
}

/**
 * Finishes a sign-in from the provider's callback parameters (query, or Apple's form body) and the
 * browser's binding cookie.
 */
export async function finishProviderSignIn(
  deps: OAuthDeps,
  input: {
    provider: Provider;
    params: Record<string, string>;
    binding: string | undefined;
    client?: EventClient;
  },
): Promise<ProviderOutcome> {
  const { provider, params } = input;
  const request = await claimRequest(deps, provider, params, input.binding);
  // The person cancelled, or the provider refused (RFC 6749 §4.1.2.1; OAuth 1.0a: `denied`).
  if (params.error !== undefined || params.denied !== undefined) throw new AppError('PROVIDER_DENIED');
  let identity: Identity;
  if (provider.kind === 'oauth1') identity = await oauth1Identity(deps, provider, request, params);
  else {
    if (!params.code) throw new AppError('PROVIDER_DENIED', 'The provider sent no authorization code.');
    identity =
      provider.kind === 'oidc'
        ? await oidcIdentity(deps, provider, request, params)
        : await oauth2Identity(deps, provider, request, params.code);
  }
  const common = { redirectTo: request.redirectTo ?? undefined, useCookie: request.useCookie };
  return deps.db.transaction(async (tx) => {
    const account = await resolveAccount(deps, tx, provider, identity.profile, request.linkAccountId);
    await keepTokens(deps, tx, account.linkId, identity.tokens);
    const client = input.client ?? null;
    if (account.linked)
      await recordEvent(deps, tx, {
        type: 'provider_linked',
        accountId: account.row.id,
        client,
        details: { provider: provider.name },
      });
    if (account.row.mfa_enabled) {
      // The provider stands for the password, not the second factor.
      const { ticket } = await issueTicket(tx, deps.config, deps.clock.now(), {
        accountId: account.row.id,
        purpose: 'mfa-login',
        keepEarlier: true,
      });
      return { kind: 'mfa', ticket, ...common };
    }
    // A new session family signed in now: a fresh sign-in for SENSITIVE_ACTION_WINDOW (auth_time).
    return {
      kind: 'session',
      session: await issueSession(deps, account.row.id, {
        db: tx,
        method: `oauth:${provider.name}`,
        client: input.client,
      }),
      ...common,
    };
  });
}

function linkConflict(conflict: LinkConflict): AppError {
  return new AppError(
    conflict === 'identity-in-use' ? 'PROVIDER_IDENTITY_IN_USE' : 'PROVIDER_ALREADY_LINKED',
  );
}

/**
 * The account an identity signs in (linking or creating it as the module comment says); `linked` when
 * the identity was just linked to an account that existed before (the owner's feed says so).
 */
async function resolveAccount(
  deps: OAuthDeps,
  tx: Queryable,
  provider: Provider,
  profile: ProviderProfile,
  linkAccountId: string | null,
): Promise<{ row: AccountRow; linkId: string; linked: boolean }> {
  const subject = subjectOf(provider, profile);
  const linked = await findAccountByIdentity(tx, provider.name, subject);
  if (linkAccountId !== null) {
    if (linked && linked.id !== linkAccountId) throw new AppError('PROVIDER_IDENTITY_IN_USE');
    let linkId = linked?.link_id;
    if (!linkId) {
      const made = await insertLink(tx, linkAccountId, provider.name, subject);
      if ('conflict' in made) throw linkConflict(made.conflict);
      linkId = made.id;
    }
    const row = await findAccountById(tx, linkAccountId);
    if (!row?.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
    return { row, linkId, linked: !linked };
  }
  if (linked) {
    if (!linked.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
    const { link_id, ...row } = linked;
    return { row, linkId: link_id, linked: false };
  }
  const existing = profile.email ? await lockAccountByEmail(tx, profile.email) : undefined;
  if (existing) {
    // HBP linked here whatever the provider knew of the address: anyone could then register the
    // victim's address at a provider that does not check it and sign in as the victim.
    if (!profile.emailVerified) throw new AppError('PROVIDER_EMAIL_NOT_VERIFIED');
    // The provider's proof is worth only as much as the account's: an active account whose address was
    // never proven may belong to whoever typed the address in (a registration with auto-activation, a
    // direct email change), and linking would sign the real owner in to that person's account.
    if (existing.active && !existing.email_verified) throw new AppError('PROVIDER_EMAIL_IN_USE');
    const made = await insertLink(tx, existing.id, provider.name, subject);
    if ('conflict' in made) throw linkConflict(made.conflict);
    // A pending registration: the provider proved the address as the emailed link would have, and
    // like a link with rivals it keeps nothing an unproven request chose (auth/registration.ts).
    if (!existing.active)
      await completeRegistration(
        deps,
        tx,
        { accountId: existing.id, payload: {} },
        `provider:${provider.name}`,
      );
    return { row: (await findAccountById(tx, existing.id)) as AccountRow, linkId: made.id, linked: true };
  }
  const email = profile.email && profile.emailVerified ? profile.email : null;
  if (deps.config.ALLOWED_EMAIL_DOMAINS.length > 0) {
    // Only an address the provider vouches for can show the domain.
    if (!email) throw new AppError('EMAIL_DOMAIN_NOT_ALLOWED');
    assertEmailDomain(deps, email);
  }
  const roles = chooseRoles(deps, undefined);
  const userData: Record<string, unknown> = {
    display_name: profile.displayName ?? email ?? `${provider.name} user`,
  };
  if (profile.avatarUrl) userData.avatar_url = profile.avatarUrl;
  const { accountId } = await insertAccount(tx, {
    email,
    passwordHash: null,
    active: true,
    isAnonymous: false,
    defaultRole: roles.defaultRole,
    roles: roles.roles,
    userData,
    emailProof: email ? { by: `provider:${provider.name}`, at: deps.clock.now() } : undefined,
  });
  const made = await insertLink(tx, accountId, provider.name, subject);
  if ('conflict' in made) throw linkConflict(made.conflict);
  return { row: (await findAccountById(tx, accountId)) as AccountRow, linkId: made.id, linked: false };
}

/** Seals the provider's tokens beside the link (PROVIDER_TOKENS_STORED), or forgets earlier ones. */
async function keepTokens(
  deps: OAuthDeps,
  tx: Queryable,
  linkId: string,
  tokens: StoredTokens,
): Promise<void> {
  if (!deps.config.PROVIDER_TOKENS_STORED) return deleteLinkTokens(tx, linkId);
  const sealed = deps.box.seal(Buffer.from(JSON.stringify(tokens), 'utf8'), tokenContext(linkId));
  const expiresAt = tokens.expires_at ? new Date(tokens.expires_at) : null;
  await saveLinkTokens(tx, linkId, sealed, expiresAt, deps.clock.now());
}

/** Associated data of sealed tokens: a sealed value copied to another link does not open there. */
const tokenContext = (linkId: string) => `provider-tokens:${linkId}`;

/** The provider tokens of the signed-in user's link to `provider`. */
export async function readProviderTokens(
  deps: OAuthDeps,
  userId: string,
  provider: string,
): Promise<StoredTokens & { provider: string }> {
  const account = await callerAccount(deps, userId);
  enabledProvider(deps, provider);
  const found = await findLinkTokens(deps.db, account.id, provider);
  if (!found) throw new AppError('PROVIDER_NOT_LINKED');
  if (found.sealed === null) throw new AppError('PROVIDER_TOKENS_NOT_STORED');
  let tokens: StoredTokens;
  try {
    tokens = JSON.parse(deps.box.open(found.sealed, tokenContext(found.linkId)).toString('utf8'));
  } catch (err) {
    // Sealed under a key that is no longer configured, or tampered with: an operator problem.
    if (err instanceof SecretBoxError) throw new AppError('INTERNAL', undefined, { cause: err });
    throw err;
  }
  return { provider, ...tokens };
}

/**
 * Unlinks `provider` from the signed-in user's account while another way to sign in remains: a
 * password, another linked provider, or magic links to the account's address. Removing a way in is a
 * sensitive change (a recent sign-in or the password).
 */
export async function unlinkProvider(
  deps: OAuthDeps,
  userId: string,
  provider: string,
  reauth: Reauthentication,
  own: OwnSignIn = {},
): Promise<void> {
  const account = await callerAccount(deps, userId);
  enabledProvider(deps, provider);
  await assertReauthenticated(deps, account, reauth);
  await deps.db.transaction(async (tx) => {
    // Two unlinks at once must not both see the other's provider as the remaining way in.
    await lockAccount(tx, account.id);
    const links = await accountLinks(tx, account.id);
    if (!links.some((l) => l.provider === provider)) throw new AppError('PROVIDER_NOT_LINKED');
    const magicLink = deps.config.MAGIC_LINK_ENABLED && account.email !== null;
    if (account.password_hash === null && links.length < 2 && !magicLink)
      throw new AppError('PROVIDER_LAST_SIGN_IN_METHOD');
    await deleteLink(tx, account.id, provider);
    await recordEvent(deps, tx, {
      type: 'provider_unlinked',
      accountId: account.id,
      sessionId: own.sessionId ?? null,
      client: own.client ?? null,
      details: { provider },
    });
  });
}

/** The box of provider tokens: the MFA secret box (same key, same rotation). */
export function providerTokenBox(ctx: Pick<AuthDeps, 'config'>): SecretBox {
  return SecretBox.fromConfig(ctx.config);
}
