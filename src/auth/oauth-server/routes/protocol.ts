/**
 * POST /auth/oauth2/token, /revoke and /introspect: form-encoded requests answered with RFC 6749's error
 * body (protocol-errors.ts). Clients authenticate by `client_secret_basic` or `client_secret_post`;
 * public clients (`none`) name themselves with `client_id`.
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { errorResponses } from '../../../errors.ts';
import { authenticateClient, presentedClient } from '../clients.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { AnyObject, OAuthErrorBody, OAuthProtocolError, protocolErrorHandling } from '../protocol-errors.ts';
import { exchangeCode, introspect, refreshGrant, revokeToken } from '../tokens-endpoint.ts';
import { acceptForms, asArray, single } from './form.ts';

type Form = Record<string, string | string[] | undefined>;

const FormBody = { type: 'object', additionalProperties: true } as const;

const invalid = (msg: string) => new OAuthProtocolError('invalid_request', msg);

function field(body: Form, name: string): string | undefined {
  return single(body[name], name, invalid);
}

async function client(deps: OAuthServerDeps, request: FastifyRequest, body: Form, confidentialOnly = false) {
  return authenticateClient(
    deps,
    presentedClient(request.headers.authorization, {
      client_id: field(body, 'client_id'),
      client_secret: field(body, 'client_secret'),
    }),
    { confidentialOnly },
  );
}

function formOf(request: FastifyRequest): Form {
  const b = request.body;
  const type = request.headers['content-type'] ?? '';
  if (!/^application\/x-www-form-urlencoded\b/i.test(type) || !b || typeof b !== 'object' || Array.isArray(b))
    throw invalid('the body must be application/x-www-form-urlencoded');
  return b as Form;
}

export const protocolRoutes: FastifyPluginAsync<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  acceptForms(app);
  protocolErrorHandling(app);
  const schema = (summary: string, ok: object = AnyObject) => ({
    tags: ['oauth2'],
    summary,
    consumes: ['application/x-www-form-urlencoded'],
    body: FormBody,
    response: { 200: ok, 400: OAuthErrorBody, 401: OAuthErrorBody, ...errorResponses(429, 503) },
  });

  app.post(
    '/token',
    { schema: schema('OAuth 2.1 token endpoint (authorization_code, refresh_token)') },
    async (request, reply) => {
      const body = formOf(request);
      const c = await client(deps, request, body);
      const grantType = field(body, 'grant_type');
      reply.header('cache-control', 'no-store');
      if (grantType === 'authorization_code')
        return exchangeCode(deps, c, {
          code: field(body, 'code'),
          redirect_uri: field(body, 'redirect_uri'),
          code_verifier: field(body, 'code_verifier'),
          resource: asArray(body.resource),
        });
      if (grantType === 'refresh_token')
        return refreshGrant(deps, c, {
          refresh_token: field(body, 'refresh_token'),
          scope: field(body, 'scope'),
          resource: asArray(body.resource),
        });
      throw new OAuthProtocolError(
        grantType === undefined ? 'invalid_request' : 'unsupported_grant_type',
        grantType === undefined
          ? 'grant_type is required'
          : 'only authorization_code and refresh_token are supported',
      );
    },
  );

  app.post(
    '/revoke',
    { schema: schema('Token revocation (RFC 7009)', { type: 'null', description: 'Revoked (or unknown)' }) },
    async (request, reply) => {
      const body = formOf(request);
      const c = await client(deps, request, body);
      const token = field(body, 'token');
      if (!token) throw invalid('token is required');
      await revokeToken(deps, c, token);
      return reply.code(200).header('cache-control', 'no-store').send();
    },
  );

  app.post(
    '/introspect',
    { schema: schema('Token introspection (RFC 7662); confidential clients only') },
    async (request, reply) => {
      const body = formOf(request);
      await client(deps, request, body, true);
      const token = field(body, 'token');
      if (!token) throw invalid('token is required');
      reply.header('cache-control', 'no-store');
      return introspect(deps, token);
    },
  );
};
