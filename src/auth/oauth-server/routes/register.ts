/** POST /auth/oauth2/register: RFC 7591 dynamic client registration (OAUTH_DYNAMIC_REGISTRATION). */
import type { FastifyPluginAsync } from 'fastify';
import { errorResponses } from '../../../errors.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { AnyObject, OAuthErrorBody, OAuthProtocolError, protocolErrorHandling } from '../protocol-errors.ts';
import { type RegistrationRequest, registerClient } from '../registration.ts';

export const registerRoute: FastifyPluginAsync<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  protocolErrorHandling(app);
  app.post(
    '/register',
    {
      schema: {
        tags: ['oauth2'],
        summary: 'Dynamic client registration (RFC 7591); public clients get no secret',
        body: AnyObject,
        response: { 201: AnyObject, 400: OAuthErrorBody, ...errorResponses(429, 503) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (!body || typeof body !== 'object' || Array.isArray(body))
        throw new OAuthProtocolError('invalid_client_metadata', 'the body must be a JSON object');
      const out = await registerClient(
        { db: deps.db, config: deps.config, now: deps.clock.now() },
        body as RegistrationRequest,
      );
      return reply.code(201).header('cache-control', 'no-store').send(out);
    },
  );
};
