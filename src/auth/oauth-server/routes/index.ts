/**
 * The /auth/oauth2 routes of the authorization server (OAUTH_SERVER_ENABLED). The protocol endpoints
 * answer RFC 6749's error body in a context of their own; the authorize page and the person's grants
 * answer the project's.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../../http/identity.ts';
import { gate, registerWhen } from '../../../http/switched-off.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { authorizeRoutes } from './authorize.ts';
import { grantsRoutes } from './grants.ts';
import { protocolRoutes } from './protocol.ts';
import { registerRoute } from './register.ts';
import { userinfoRoute } from './userinfo.ts';

export const oauthServerRoutes: FastifyPluginAsync<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  await app.register(authorizeRoutes, { deps });
  await app.register(protocolRoutes, { deps });
  await app.register(userinfoRoute, { deps });
  await registerWhen(app, gate(deps.config, { OAUTH_DYNAMIC_REGISTRATION: true }), (s) =>
    s.register(registerRoute, { deps }),
  );
  await app.register(signedInRoutes(async (s) => void (await s.register(grantsRoutes, { deps }))));
};
