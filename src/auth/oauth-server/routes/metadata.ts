/**
 * GET /.well-known/oauth-authorization-server (RFC 8414) and /.well-known/openid-configuration: where the
 * endpoints are and what this server supports. Served at the root, as clients look for them there.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../../../config.ts';
import { issuerOf, SCOPES } from '../deps.ts';
import { AnyObject } from '../protocol-errors.ts';

export function serverMetadata(config: Config, signingAlg: string): Record<string, unknown> {
  const issuer = issuerOf(config);
  const at = (p: string) => `${issuer}/auth/oauth2/${p}`;
  const doc: Record<string, unknown> = {
    issuer,
    authorization_endpoint: at('authorize'),
    token_endpoint: at('token'),
    revocation_endpoint: at('revoke'),
    introspection_endpoint: at('introspect'),
    userinfo_endpoint: at('userinfo'),
    jwks_uri: `${issuer}/auth/jwks`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [signingAlg],
    claims_supported: [
      'sub',
      'iss',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'sid',
      'email',
      'email_verified',
      'name',
      'picture',
    ],
  };
  if (config.OAUTH_DYNAMIC_REGISTRATION) doc.registration_endpoint = at('register');
  return doc;
}

export const metadataRoutes: FastifyPluginAsync<{ config: Config; signingAlg: string }> = async (
  app,
  { config, signingAlg },
) => {
  const doc = serverMetadata(config, signingAlg);
  const schema = {
    tags: ['oauth2'],
    summary: 'Authorization server metadata (RFC 8414 / OpenID discovery)',
    response: { 200: AnyObject },
  };
  for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'])
    app.get(path, { schema }, async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return doc;
    });
};
