/**
 * Dynamic client registration (RFC 7591), when OAUTH_DYNAMIC_REGISTRATION is on: anyone may register a
 * client, so what it says of itself (its name) is all the consent page can show. Public clients
 * (`token_endpoint_auth_method: none`) get no secret; the others get one, shown once.
 */
import type { Config } from '../../config.ts';
import type { Queryable } from '../../db/database.ts';
import { checkRedirectUris, createClient } from './clients.ts';
import { OAuthProtocolError } from './protocol-errors.ts';

export interface RegistrationRequest {
  redirect_uris?: unknown;
  client_name?: unknown;
  token_endpoint_auth_method?: unknown;
  grant_types?: unknown;
  response_types?: unknown;
  logo_uri?: unknown;
  scope?: unknown;
}

const METHODS = ['none', 'client_secret_basic', 'client_secret_post'];
const GRANTS = ['authorization_code', 'refresh_token'];

const metadataError = (msg: string) => new OAuthProtocolError('invalid_client_metadata', msg);

function strings(v: unknown, name: string): string[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && x.length <= 2048) || v.length > 20)
    throw metadataError(`${name} must be an array of strings`);
  return v as string[];
}

export async function registerClient(
  deps: { db: Queryable; config: Config; now: Date },
  req: RegistrationRequest,
): Promise<Record<string, unknown>> {
  const redirectUris = strings(req.redirect_uris, 'redirect_uris') ?? [];
  const bad = checkRedirectUris(redirectUris, deps.config.isProduction);
  if (bad) throw new OAuthProtocolError('invalid_redirect_uri', bad);
  const method = req.token_endpoint_auth_method ?? 'client_secret_basic';
  if (typeof method !== 'string' || !METHODS.includes(method))
    throw metadataError(`token_endpoint_auth_method must be one of ${METHODS.join(', ')}`);
  const grants = strings(req.grant_types, 'grant_types') ?? ['authorization_code'];
  if (grants.some((g) => !GRANTS.includes(g)))
    throw metadataError('grant_types may hold authorization_code and refresh_token only');
  const responses = strings(req.response_types, 'response_types') ?? ['code'];
  if (responses.some((r) => r !== 'code')) throw metadataError('response_types may hold code only');
  if (req.client_name !== undefined && (typeof req.client_name !== 'string' || req.client_name.length > 200))
    throw metadataError('client_name must be a string of at most 200 characters');
  let logoUri: string | undefined;
  if (req.logo_uri !== undefined) {
    if (typeof req.logo_uri !== 'string' || !/^https:\/\//.test(req.logo_uri))
      throw metadataError('logo_uri must be an https URL');
    logoUri = req.logo_uri;
  }
  const name =
    (req.client_name as string | undefined)?.trim() ||
    new URL(redirectUris[0] as string).host ||
    'Unnamed client';
  const made = await createClient(
    deps.db,
    { name, redirectUris, confidential: method !== 'none', logoUri },
    'registration',
  );
  const out: Record<string, unknown> = {
    client_id: made.clientId,
    client_id_issued_at: Math.floor(deps.now.getTime() / 1000),
    client_name: name,
    redirect_uris: redirectUris,
    token_endpoint_auth_method: method,
    grant_types: grants,
    response_types: responses,
  };
  if (made.clientSecret !== undefined) {
    out.client_secret = made.clientSecret;
    out.client_secret_expires_at = 0;
  }
  if (logoUri) out.logo_uri = logoUri;
  return out;
}
