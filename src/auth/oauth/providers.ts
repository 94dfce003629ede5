/**
 * The sign-in providers: HBP's eight and the generic OpenID Connect one, built from the settings. Each
 * is one of three kinds: OAuth 2.0 with a profile endpoint (GitHub, Facebook, Windows Live, Spotify),
 * OpenID Connect through discovery (Google, LinkedIn, Apple, `oidc`), or OAuth 1.0a (Twitter). A
 * provider also says whether it vouches for the email it returns; only a vouched email may be linked to
 * an existing account (docs/providers.md, "Which account").
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import type { Config } from '../../config.ts';
import { KeyError } from '../key-material.ts';
import { getWithToken, invalidResponse, jsonObject, type ProviderHttp } from './http.ts';
import type { TokenSet } from './oauth2.ts';

export const PROVIDER_NAMES = [
  'github',
  'google',
  'facebook',
  'twitter',
  'linkedin',
  'apple',
  'windowslive',
  'spotify',
  'oidc',
] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** What a provider says about the person who signed in. */
export interface ProviderProfile {
  /** The provider's stable id of the person (auth.account_providers.auth_provider_unique_id). */
  subject: string;
  email: string | null;
  /** True only when the provider vouches that the person controls `email`. */
  emailVerified: boolean;
  displayName: string | null;
  avatarUrl: string | null;
}

interface Common {
  name: ProviderName;
  /** `form_post`: the provider comes back with a cross-site POST (Apple). */
  responseMode: 'query' | 'form_post';
}

export interface OAuth2Provider extends Common {
  kind: 'oauth2';
  clientId: string;
  clientSecret: string;
  authorizationUrl: string;
  tokenUrl: string;
  profileUrl: string;
  scope: string;
  pkce: boolean;
  tokenAuth: 'basic' | 'post';
  profile(http: ProviderHttp, tokens: TokenSet): Promise<ProviderProfile>;
}

export interface OidcProvider extends Common {
  kind: 'oidc';
  issuer: string;
  clientId: string;
  /** The client secret; Apple's is a short-lived JWT signed with the team's key. */
  clientSecret(now: Date): Promise<string>;
  scope: string;
  /** Reads the userinfo endpoint too (Apple has none). */
  userinfo: boolean;
  /** Whether the provider vouches for the email of these claims. */
  emailTrusted(claims: Record<string, unknown>): boolean;
  /** Prefix of the stored subject (the generic provider's issuer may change; see subjectOf). */
  qualifySubject: boolean;
  /** The token endpoint's client authentication when the discovery document is not to be followed. */
  tokenAuth?: 'basic' | 'post';
  /** Claims the callback itself carries beside the code (Apple sends the name once, as a form field). */
  callbackClaims?(params: Record<string, string>): Record<string, unknown>;
}

export interface OAuth1Provider extends Common {
  kind: 'oauth1';
  consumerKey: string;
  consumerSecret: string;
  requestTokenUrl: string;
  authorizationUrl: string;
  accessTokenUrl: string;
  profileUrl: string;
}

export type Provider = OAuth2Provider | OidcProvider | OAuth1Provider;

const text = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
const idText = (v: unknown): string | null =>
  typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : text(v);

/** `email_verified` as providers send it: a boolean, or the string "true" (Apple, some IdPs). */
export function claimTrue(v: unknown): boolean {
  return v === true || v === 'true';
}

function requireSubject(v: unknown, what: string): string {
  const s = idText(v);
  if (s === null || s.length > 255) throw invalidResponse(`${what} (no id)`);
  return s;
}

/** GitHub: the profile, then the primary verified address of /user/emails (scope user:email). */
async function githubProfile(http: ProviderHttp, url: string, tokens: TokenSet): Promise<ProviderProfile> {
  const headers = { accept: 'application/vnd.github+json' };
  const p = jsonObject(await getWithToken(http, 'profile', url, tokens.access_token, headers), 'profile');
  let email: string | null = null;
  let verified = false;
  try {
    const res = await getWithToken(
      http,
      'email list',
      `${url.replace(/\/+$/, '')}/emails`,
      tokens.access_token,
      headers,
    );
    const list: unknown = JSON.parse(res.text);
    if (Array.isArray(list)) {
      const entries = list.filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null);
      const pick =
        entries.find((e) => e.primary === true && e.verified === true) ??
        entries.find((e) => e.verified === true);
      if (pick) {
        email = text(pick.email);
        verified = email !== null;
      }
    }
  } catch {
    // Without the list (scope refused), the public address, unverified.
  }
  if (email === null) email = text(p.email);
  return {
    subject: requireSubject(p.id, 'profile'),
    email,
    emailVerified: verified,
    displayName: text(p.name) ?? text(p.login),
    avatarUrl: text(p.avatar_url),
  };
}

async function facebookProfile(http: ProviderHttp, url: string, tokens: TokenSet): Promise<ProviderProfile> {
  const p = jsonObject(await getWithToken(http, 'profile', url, tokens.access_token), 'profile');
  const picture = (p.picture as { data?: { url?: unknown } } | undefined)?.data?.url;
  return {
    subject: requireSubject(p.id, 'profile'),
    email: text(p.email),
    // Facebook does not say whether the address was confirmed.
    emailVerified: false,
    displayName: text(p.name),
    avatarUrl: text(picture),
  };
}

async function windowsLiveProfile(
  http: ProviderHttp,
  url: string,
  tokens: TokenSet,
): Promise<ProviderProfile> {
  const p = jsonObject(await getWithToken(http, 'profile', url, tokens.access_token), 'profile');
  return {
    subject: requireSubject(p.id, 'profile'),
    // Microsoft Graph's `mail` is whatever the account holder typed; it is not vouched for.
    email: text(p.mail) ?? text(p.userPrincipalName),
    emailVerified: false,
    displayName: text(p.displayName),
    avatarUrl: null,
  };
}

async function spotifyProfile(http: ProviderHttp, url: string, tokens: TokenSet): Promise<ProviderProfile> {
  const p = jsonObject(await getWithToken(http, 'profile', url, tokens.access_token), 'profile');
  const images = Array.isArray(p.images) ? (p.images as { url?: unknown }[]) : [];
  return {
    subject: requireSubject(p.id, 'profile'),
    // Spotify documents its email as unverified.
    email: text(p.email),
    emailVerified: false,
    displayName: text(p.display_name),
    avatarUrl: text(images[0]?.url),
  };
}

/** The profile of OpenID Connect claims (ID token, completed by userinfo). */
export function oidcProfile(provider: OidcProvider, claims: Record<string, unknown>): ProviderProfile {
  const given = [text(claims.given_name), text(claims.family_name)].filter((x) => x !== null).join(' ');
  const email = text(claims.email);
  return {
    subject: requireSubject(claims.sub, 'ID token'),
    email,
    emailVerified: email !== null && provider.emailTrusted(claims),
    displayName: text(claims.name) ?? (given === '' ? null : given) ?? text(claims.preferred_username),
    avatarUrl: text(claims.picture),
  };
}

/** The value stored as auth_provider_unique_id. */
export function subjectOf(provider: Provider, profile: ProviderProfile): string {
  // The generic provider's issuer is a setting: the same `sub` from another issuer is someone else.
  if (provider.kind === 'oidc' && provider.qualifySubject) return `${provider.issuer}#${profile.subject}`;
  return profile.subject;
}

/** The Apple key: base64 of the .p8 file (HBP), or the PEM itself. */
export function applePrivateKey(value: string): KeyObject {
  const pem = value.includes('-----BEGIN') ? value : Buffer.from(value, 'base64').toString('utf8');
  try {
    return createPrivateKey(pem.replace(/\\n/g, '\n'));
  } catch {
    // Said at start, with the other settings' problems (context.ts), never at a sign-in.
    throw new KeyError(
      'APPLE_PRIVATE_KEY is not a readable private key (base64 of the .p8 file, or its PEM text)',
    );
  }
}

/**
 * Apple sends the person's name once, in the first callback's `user` form field (JSON), never in the ID
 * token: given_name and family_name for the profile.
 */
function appleNameClaims(params: Record<string, string>): Record<string, unknown> {
  if (!params.user) return {};
  try {
    const parsed = JSON.parse(params.user) as { name?: { firstName?: unknown; lastName?: unknown } };
    const claims: Record<string, unknown> = {};
    if (typeof parsed.name?.firstName === 'string') claims.given_name = parsed.name.firstName;
    if (typeof parsed.name?.lastName === 'string') claims.family_name = parsed.name.lastName;
    return claims;
  } catch {
    return {}; // Not JSON: no name.
  }
}

/** Apple's client secret: an ES256 JWT from the team, for the client, valid 5 minutes. */
function appleClientSecret(config: Config, key: KeyObject) {
  return (now: Date) => {
    const iat = Math.floor(now.getTime() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: config.APPLE_KEY_ID })
      .setIssuer(config.APPLE_TEAM_ID)
      .setSubject(config.APPLE_CLIENT_ID)
      .setAudience(config.APPLE_ISSUER)
      .setIssuedAt(iat)
      .setExpirationTime(iat + 300)
      .sign(key);
  };
}

const fixedSecret = (secret: string) => async () => secret;

/** The enabled providers, by name. Throws when the Apple key cannot be read. */
export function enabledProviders(c: Config): Map<ProviderName, Provider> {
  const out = new Map<ProviderName, Provider>();
  const add = (p: Provider) => out.set(p.name, p);
  if (c.GITHUB_ENABLED)
    add({
      kind: 'oauth2',
      name: 'github',
      responseMode: 'query',
      clientId: c.GITHUB_CLIENT_ID,
      clientSecret: c.GITHUB_CLIENT_SECRET,
      authorizationUrl: c.GITHUB_AUTHORIZATION_URL,
      tokenUrl: c.GITHUB_TOKEN_URL,
      profileUrl: c.GITHUB_USER_PROFILE_URL,
      scope: 'read:user user:email',
      pkce: true,
      tokenAuth: 'post',
      profile: (http, t) => githubProfile(http, c.GITHUB_USER_PROFILE_URL, t),
    });
  if (c.GOOGLE_ENABLED)
    add({
      kind: 'oidc',
      name: 'google',
      responseMode: 'query',
      issuer: c.GOOGLE_ISSUER,
      clientId: c.GOOGLE_CLIENT_ID,
      clientSecret: fixedSecret(c.GOOGLE_CLIENT_SECRET),
      scope: 'openid email profile',
      userinfo: true,
      // Google is authoritative for an address it verified when it hosts it: gmail.com, or a Workspace
      // domain (the `hd` claim). A verified address elsewhere may have changed hands since.
      emailTrusted: (cl) =>
        claimTrue(cl.email_verified) &&
        (String(cl.email).toLowerCase().endsWith('@gmail.com') || typeof cl.hd === 'string'),
      qualifySubject: false,
    });
  if (c.FACEBOOK_ENABLED)
    add({
      kind: 'oauth2',
      name: 'facebook',
      responseMode: 'query',
      clientId: c.FACEBOOK_CLIENT_ID,
      clientSecret: c.FACEBOOK_CLIENT_SECRET,
      authorizationUrl: c.FACEBOOK_AUTHORIZATION_URL,
      tokenUrl: c.FACEBOOK_TOKEN_URL,
      profileUrl: c.FACEBOOK_USER_PROFILE_URL,
      scope: 'email public_profile',
      pkce: true,
      tokenAuth: 'post',
      profile: (http, t) => facebookProfile(http, c.FACEBOOK_USER_PROFILE_URL, t),
    });
  if (c.TWITTER_ENABLED)
    add({
      kind: 'oauth1',
      name: 'twitter',
      responseMode: 'query',
      consumerKey: c.TWITTER_CONSUMER_KEY,
      consumerSecret: c.TWITTER_CONSUMER_SECRET,
      requestTokenUrl: c.TWITTER_REQUEST_TOKEN_URL,
      authorizationUrl: c.TWITTER_AUTHORIZATION_URL,
      accessTokenUrl: c.TWITTER_ACCESS_TOKEN_URL,
      profileUrl: c.TWITTER_USER_PROFILE_URL,
    });
  if (c.LINKEDIN_ENABLED)
    add({
      kind: 'oidc',
      name: 'linkedin',
      responseMode: 'query',
      issuer: c.LINKEDIN_ISSUER,
      clientId: c.LINKEDIN_CLIENT_ID,
      clientSecret: fixedSecret(c.LINKEDIN_CLIENT_SECRET),
      scope: 'openid profile email',
      userinfo: true,
      emailTrusted: (cl) => claimTrue(cl.email_verified),
      qualifySubject: false,
    });
  if (c.APPLE_ENABLED)
    add({
      kind: 'oidc',
      name: 'apple',
      responseMode: 'form_post',
      issuer: c.APPLE_ISSUER,
      clientId: c.APPLE_CLIENT_ID,
      clientSecret: appleClientSecret(c, applePrivateKey(c.APPLE_PRIVATE_KEY)),
      scope: 'openid name email',
      userinfo: false,
      // Apple verifies every address it shares, its private relay addresses included.
      emailTrusted: (cl) => claimTrue(cl.email_verified),
      qualifySubject: false,
      tokenAuth: 'post',
      callbackClaims: appleNameClaims,
    });
  if (c.WINDOWS_LIVE_ENABLED)
    add({
      kind: 'oauth2',
      name: 'windowslive',
      responseMode: 'query',
      clientId: c.WINDOWS_LIVE_CLIENT_ID,
      clientSecret: c.WINDOWS_LIVE_CLIENT_SECRET,
      authorizationUrl: c.WINDOWS_LIVE_AUTHORIZATION_URL,
      tokenUrl: c.WINDOWS_LIVE_TOKEN_URL,
      profileUrl: c.WINDOWS_LIVE_USER_PROFILE_URL,
      scope: 'openid profile email offline_access User.Read',
      pkce: true,
      tokenAuth: 'post',
      profile: (http, t) => windowsLiveProfile(http, c.WINDOWS_LIVE_USER_PROFILE_URL, t),
    });
  if (c.SPOTIFY_ENABLED)
    add({
      kind: 'oauth2',
      name: 'spotify',
      responseMode: 'query',
      clientId: c.SPOTIFY_CLIENT_ID,
      clientSecret: c.SPOTIFY_CLIENT_SECRET,
      authorizationUrl: c.SPOTIFY_AUTHORIZATION_URL,
      tokenUrl: c.SPOTIFY_TOKEN_URL,
      profileUrl: c.SPOTIFY_USER_PROFILE_URL,
      scope: 'user-read-email user-read-private',
      pkce: true,
      tokenAuth: 'basic',
      profile: (http, t) => spotifyProfile(http, c.SPOTIFY_USER_PROFILE_URL, t),
    });
  if (c.OIDC_ENABLED)
    add({
      kind: 'oidc',
      name: 'oidc',
      responseMode: 'query',
      issuer: c.OIDC_ISSUER,
      clientId: c.OIDC_CLIENT_ID,
      clientSecret: fixedSecret(c.OIDC_CLIENT_SECRET),
      scope: c.OIDC_SCOPES,
      userinfo: true,
      emailTrusted: (cl) => claimTrue(cl.email_verified),
      qualifySubject: true,
    });
  return out;
}
