/** GET|POST /auth/oauth2/userinfo: the person behind an access token issued for this server's own APIs. */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../../errors.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { AnyObject } from '../protocol-errors.ts';
import { userinfo } from '../tokens-endpoint.ts';

const BEARER = /^Bearer +(\S+)\s*$/i;

export const userinfoRoute: FastifyPluginAsync<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  const handler = async (request: FastifyRequest, _reply: FastifyReply) => {
    const m = BEARER.exec(request.headers.authorization ?? '');
    const info = m ? await userinfo(deps, m[1] as string) : undefined;
    if (!info)
      throw new AppError(
        'UNAUTHENTICATED',
        'A valid access token of this server, with the openid scope and no other resource, is required.',
        {
          headers: { 'www-authenticate': m ? 'Bearer error="invalid_token"' : 'Bearer' },
        },
      );
    return info;
  };
  const schema = {
    tags: ['oauth2'],
    summary: 'OpenID Connect userinfo',
    response: { 200: AnyObject, ...errorResponses(401, 429) },
  };
  app.get('/userinfo', { schema }, handler);
  app.post('/userinfo', { schema }, handler);
};
