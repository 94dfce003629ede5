/**
 * Identity acquisition: the protocol half of a provider sign-in, which knows nothing of accounts.
 *
 * - `authorizationRequest` builds where the browser is sent (OAuth 2.0 / OpenID Connect with `state`,
 *   PKCE where the provider supports it and a `nonce` for OpenID Connect; OAuth 1.0a with a request
 *   token) and the values to remember until the callback.
 * - `acquireIdentity` turns the callback's parameters into the person's profile and the provider's
 *   tokens: the code is exchanged (with the verifier), an ID token is validated in full (oidc.ts), the
 *   userinfo endpoint completes it where the provider has one, and what a provider sends beside the code
 *   (Apple's name) comes from the provider's own definition (providers.ts), not from here.
 *
 * Which account the identity signs in to is decided by auth/flows/oauth.ts.
 */
import { AppError } from '../../errors.ts';
import { getWithToken, invalidResponse, jsonObject } from './http.ts';
import * as oauth1 from './oauth1.ts';
import { exchangeCode, pkceChallenge, randomValue, type TokenSet, withQuery } from './oauth2.ts';
import { issuerSupportsPkce, tokenAuthMethod, validateIdToken } from './oidc.ts';
import {
  type OAuth1Provider,
  type OAuth2Provider,
  type OidcProvider,
  oidcProfile,
  type Provider,
  type ProviderProfile,
} from './providers.ts';
import type { ProviderRegistry } from './registry.ts';

/** What the start remembers until the callback (auth.provider_requests). */
export interface PendingAuthorization {
  /** The provider URL the browser is sent to. */
  url: string;
  /** `state`, or the OAuth 1.0a request token: the key the callback brings back. */
  key: string;
  codeVerifier?: string;
  nonce?: string;
  /** OAuth 1.0a: the request token's secret, which signs the access-token request. */
  requestTokenSecret?: string;
}

/** The remembered values a callback is checked against (a claimed auth.provider_requests row). */
export interface RememberedAuthorization {
  codeVerifier: string | null;
  nonce: string | null;
  requestTokenSecret: string | null;
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

/** What the callback learnt from the provider. */
export interface Identity {
  profile: ProviderProfile;
  tokens: StoredTokens;
}

/** Builds the provider URL of a new sign-in and what to remember for its callback. */
export async function authorizationRequest(
  registry: ProviderRegistry,
  provider: Provider,
  redirectUri: string,
): Promise<PendingAuthorization> {
  if (provider.kind === 'oauth1') {
    const rt = await oauth1.requestToken(
      registry.http,
      provider.requestTokenUrl,
      oauth1Creds(provider),
      redirectUri,
    );
    return {
      url: withQuery(provider.authorizationUrl, { oauth_token: rt.token }),
      key: rt.token,
      requestTokenSecret: rt.secret,
    };
  }
  const state = randomValue();
  let authorizationUrl: string;
  let pkce: boolean;
  let nonce: string | undefined;
  if (provider.kind === 'oidc') {
    const { metadata } = await registry.issuer(provider).discover();
    authorizationUrl = metadata.authorization_endpoint;
    pkce = issuerSupportsPkce(metadata);
    nonce = randomValue();
  } else {
    authorizationUrl = provider.authorizationUrl;
    pkce = provider.pkce;
  }
  const codeVerifier = pkce ? randomValue() : undefined;
  const url = withQuery(authorizationUrl, {
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
  return { url, key: state, codeVerifier, nonce };
}

/**
 * The person's identity from a callback whose request was already claimed. The person cancelling (or
 * the provider refusing) is PROVIDER_DENIED.
 */
export async function acquireIdentity(
  registry: ProviderRegistry,
  provider: Provider,
  remembered: RememberedAuthorization,
  params: Record<string, string>,
  redirectUri: string,
  now: Date,
): Promise<Identity> {
  // RFC 6749 §4.1.2.1; OAuth 1.0a: `denied`.
  if (params.error !== undefined || params.denied !== undefined) throw new AppError('PROVIDER_DENIED');
  if (provider.kind === 'oauth1') return oauth1Identity(registry, provider, remembered, params);
  if (!params.code) throw new AppError('PROVIDER_DENIED', 'The provider sent no authorization code.');
  const exchange = { code: params.code, redirectUri, codeVerifier: remembered.codeVerifier ?? undefined };
  return provider.kind === 'oidc'
    ? oidcIdentity(registry, provider, remembered, params, exchange, now)
    : oauth2Identity(registry, provider, exchange, now);
}

interface Exchange {
  code: string;
  redirectUri: string;
  codeVerifier: string | undefined;
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
  registry: ProviderRegistry,
  p: OAuth2Provider,
  exchange: Exchange,
  now: Date,
): Promise<Identity> {
  const tokens = await exchangeCode(registry.http, {
    tokenUrl: p.tokenUrl,
    clientId: p.clientId,
    clientSecret: p.clientSecret,
    auth: p.tokenAuth,
    ...exchange,
  });
  return { profile: await p.profile(registry.http, tokens), tokens: storedTokens(tokens, now) };
}

async function oidcIdentity(
  registry: ProviderRegistry,
  p: OidcProvider,
  remembered: RememberedAuthorization,
  params: Record<string, string>,
  exchange: Exchange,
  now: Date,
): Promise<Identity> {
  const { metadata, keys } = await registry.issuer(p).discover();
  const tokens = await exchangeCode(registry.http, {
    tokenUrl: metadata.token_endpoint,
    clientId: p.clientId,
    clientSecret: await p.clientSecret(now),
    auth: p.tokenAuth ?? tokenAuthMethod(metadata),
    ...exchange,
  });
  if (!tokens.id_token) throw new AppError('ID_TOKEN_INVALID', 'The provider returned no ID token.');
  const claims: Record<string, unknown> = await validateIdToken(tokens.id_token, keys, {
    issuer: p.issuer,
    clientId: p.clientId,
    nonce: remembered.nonce ?? '',
    now,
    algorithms: metadata.id_token_signing_alg_values_supported,
  });
  if (p.userinfo && metadata.userinfo_endpoint)
    await addUserinfo(registry, metadata.userinfo_endpoint, tokens, claims);
  // What the callback carries beside the code only fills in what the ID token did not say.
  for (const [k, v] of Object.entries(p.callbackClaims?.(params) ?? {})) claims[k] ??= v;
  return { profile: oidcProfile(p, claims), tokens: storedTokens(tokens, now) };
}

/**
 * Completes the ID token's claims with the userinfo endpoint's (Core §5.3). Its `sub` must be the ID
 * token's (§5.3.2). The email and email_verified are taken as a pair from the same source.
 */
async function addUserinfo(
  registry: ProviderRegistry,
  url: string,
  tokens: TokenSet,
  claims: Record<string, unknown>,
): Promise<void> {
  const info = jsonObject(
    await getWithToken(registry.http, 'userinfo', url, tokens.access_token),
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

function oauth1Creds(p: OAuth1Provider, token?: { token: string; secret: string }): oauth1.OAuth1Credentials {
  return {
    consumerKey: p.consumerKey,
    consumerSecret: p.consumerSecret,
    token: token?.token,
    tokenSecret: token?.secret,
  };
}

async function oauth1Identity(
  registry: ProviderRegistry,
  p: OAuth1Provider,
  remembered: RememberedAuthorization,
  params: Record<string, string>,
): Promise<Identity> {
  const verifier = params.oauth_verifier;
  if (!verifier) throw new AppError('PROVIDER_DENIED');
  const http = registry.http;
  const requestToken = { token: params.oauth_token as string, secret: remembered.requestTokenSecret ?? '' };
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
