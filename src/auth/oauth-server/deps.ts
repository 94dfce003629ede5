/** What the authorization server needs: the session domain's parts, its key, clients and the cookie secret. */
import type { SessionDeps } from '../deps.ts';
import type { MetadataDocuments } from './cimd.ts';
import type { OAuthKeys } from './keys.ts';

export interface OAuthServerDeps extends SessionDeps {
  readonly oauthKeys: OAuthKeys;
  readonly documents: MetadataDocuments;
  /** Binds consent forms to the session they were shown in (HMAC key). */
  readonly cookieSecret: string;
}

/** The issuer: SERVER_URL without a trailing slash. */
export function issuerOf(config: SessionDeps['config']): string {
  return config.SERVER_URL.replace(/\/+$/, '');
}

/** Scopes this server knows. `graphql` adds the person's Hasura claims to the access token. */
export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'graphql'] as const;

/** How long an authorization code lives (seconds). */
export const CODE_LIFETIME_S = 60;
