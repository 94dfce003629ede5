/**
 * Who a client is: one an operator trusts (`gatehouse oauth-clients create`), one that registered itself
 * (RFC 7591, when OAUTH_DYNAMIC_REGISTRATION is on), or one named by the https URL of its metadata
 * document (CIMD, fetched). Also how its redirect URIs are matched and how it authenticates at the token
 * endpoint.
 */
import { randomBytes } from 'node:crypto';
import { secretsEqual } from '../../constant-time.ts';
import type { Queryable } from '../../db/database.ts';
import { sha256Hex } from '../secrets.ts';
import { CimdError, isDocumentClientId, type MetadataDocuments } from './cimd.ts';
import { OAuthProtocolError } from './protocol-errors.ts';
import { type ClientRow, findClient, insertClient } from './store.ts';

export interface OAuthClient {
  id: string;
  name: string;
  redirectUris: string[];
  logoUri: string | undefined;
  /** SHA-256 of the secret of a confidential client; null for a public one. */
  secretHash: string | null;
  kind: 'operator' | 'registration' | 'metadata-document';
}

export interface ClientDeps {
  db: Queryable;
  documents: MetadataDocuments;
}

/** Why a client_id cannot be used (shown on the error page, never sent to a redirect URI). */
export class UnknownClient extends Error {}

function fromRow(r: ClientRow): OAuthClient {
  return {
    id: r.id,
    name: r.name,
    redirectUris: r.redirect_uris,
    logoUri: r.logo_uri ?? undefined,
    secretHash: r.secret_hash,
    kind: r.origin,
  };
}

/** The client named by `clientId`; throws UnknownClient. */
export async function resolveClient(deps: ClientDeps, clientId: string): Promise<OAuthClient> {
  if (clientId === '' || clientId.length > 2048) throw new UnknownClient('client_id is missing');
  if (isDocumentClientId(clientId)) {
    try {
      const doc = await deps.documents.get(clientId);
      return {
        id: clientId,
        name: doc.client_name ?? new URL(clientId).host,
        redirectUris: doc.redirect_uris,
        logoUri: doc.logo_uri,
        secretHash: null,
        kind: 'metadata-document',
      };
    } catch (err) {
      if (err instanceof CimdError) throw new UnknownClient(err.message);
      throw err;
    }
  }
  const row = await findClient(deps.db, clientId);
  if (!row) throw new UnknownClient('no client has this client_id');
  return fromRow(row);
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * Whether `given` is one of the client's redirect URIs: compared exactly, except that a loopback
 * redirect (a native app listening on a port it picks at run time) may use any port (RFC 8252 §7.3).
 */
export function redirectUriAllowed(client: OAuthClient, given: string): boolean {
  if (client.redirectUris.includes(given)) return true;
  let g: URL;
  try {
    g = new URL(given);
  } catch {
    return false;
  }
  if (g.protocol !== 'http:' || !LOOPBACK_HOSTS.has(g.hostname)) return false;
  return client.redirectUris.some((r) => {
    try {
      const u = new URL(r);
      if (u.protocol !== 'http:' || u.hostname !== g.hostname) return false;
      u.port = g.port;
      return u.href === g.href;
    } catch {
      return false;
    }
  });
}

/** What a token-endpoint request says of the client: from the Basic header or the body. */
export interface PresentedClient {
  clientId: string | undefined;
  secret: string | undefined;
  /** Whether the credentials came in an Authorization: Basic header. */
  basic: boolean;
}

export function presentedClient(
  authorization: string | undefined,
  body: { client_id?: string; client_secret?: string },
): PresentedClient {
  const m = authorization === undefined ? null : /^Basic +([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (m) {
    const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw invalidClient(true);
    // RFC 6749 §2.3.1: both halves are form-urlencoded before being joined.
    const dec = (s: string) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, ' '));
      } catch {
        throw invalidClient(true);
      }
    };
    const clientId = dec(decoded.slice(0, colon));
    if (body.client_id !== undefined && body.client_id !== clientId)
      throw new OAuthProtocolError('invalid_request', 'client_id differs between the header and the body');
    return { clientId, secret: dec(decoded.slice(colon + 1)), basic: true };
  }
  return { clientId: body.client_id, secret: body.client_secret, basic: false };
}

function invalidClient(basic: boolean): OAuthProtocolError {
  return new OAuthProtocolError(
    'invalid_client',
    'client authentication failed',
    basic ? { 'www-authenticate': 'Basic realm="gatehouse", charset="UTF-8"' } : {},
  );
}

/**
 * The client of a token-endpoint request, authenticated: a confidential client by its secret, a public
 * one by its id alone. `confidentialOnly`: introspection, which public clients may not use.
 */
export async function authenticateClient(
  deps: ClientDeps,
  presented: PresentedClient,
  opts: { confidentialOnly?: boolean } = {},
): Promise<OAuthClient> {
  if (!presented.clientId) throw invalidClient(presented.basic);
  let client: OAuthClient;
  try {
    client = await resolveClient(deps, presented.clientId);
  } catch (err) {
    if (err instanceof UnknownClient) throw invalidClient(presented.basic);
    throw err;
  }
  if (client.secretHash === null) {
    if (opts.confidentialOnly || presented.secret !== undefined) throw invalidClient(presented.basic);
    return client;
  }
  if (presented.secret === undefined || !secretsEqual(sha256Hex(presented.secret), client.secretHash))
    throw invalidClient(presented.basic);
  return client;
}

/** Checks redirect URIs given by an operator or a registration: absolute, no fragment, https or loopback or a private scheme. */
export function checkRedirectUris(uris: readonly string[], production: boolean): string | undefined {
  if (uris.length === 0) return 'at least one redirect URI is required';
  for (const r of uris) {
    let u: URL;
    try {
      u = new URL(r);
    } catch {
      return `"${r.slice(0, 200)}" is not an absolute URI`;
    }
    if (u.hash) return `"${r.slice(0, 200)}" has a fragment`;
    if (u.protocol === 'http:' && !LOOPBACK_HOSTS.has(u.hostname) && production)
      return `"${r.slice(0, 200)}" must be https (or a loopback http URI)`;
    if (u.protocol === 'javascript:' || u.protocol === 'data:' || u.protocol === 'file:')
      return `"${r.slice(0, 200)}" has a scheme that cannot be a redirect URI`;
  }
  return undefined;
}

/** Stores a client; returns its id and, for a confidential client, its secret (shown once). */
export async function createClient(
  db: Queryable,
  input: { name: string; redirectUris: string[]; confidential: boolean; logoUri?: string },
  origin: ClientRow['origin'],
): Promise<{ clientId: string; clientSecret: string | undefined }> {
  const clientId = `gh_${randomBytes(12).toString('base64url')}`;
  const clientSecret = input.confidential ? randomBytes(32).toString('base64url') : undefined;
  await insertClient(db, {
    id: clientId,
    secret_hash: clientSecret === undefined ? null : sha256Hex(clientSecret),
    name: input.name,
    redirect_uris: input.redirectUris,
    logo_uri: input.logoUri ?? null,
    origin,
  });
  return { clientId, clientSecret };
}
