/**
 * GET /auth/providers/<provider>/tokens (PROVIDER_TOKENS_STORED): the provider's tokens from the
 * signed-in user's last sign-in with it, so the app can call the provider's API on their behalf.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { type OAuthDeps, readProviderTokens } from '../../flows/oauth.ts';
import { ProviderParam } from './common.ts';

const Tokens = Type.Object({
  provider: Type.String(),
  access_token: Type.String(),
  token_type: Type.Optional(Type.String()),
  refresh_token: Type.Optional(Type.String()),
  id_token: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String()),
  expires_at: Type.Optional(
    Type.String({ format: 'date-time', description: 'When the access token expires.' }),
  ),
  token_secret: Type.Optional(
    Type.String({ description: 'OAuth 1.0a (Twitter): signs requests with access_token.' }),
  ),
});

export const providerTokensRoute: FastifyPluginAsyncTypebox<{ deps: OAuthDeps }> = async (app, { deps }) => {
  app.get(
    '/providers/:provider/tokens',
    {
      schema: {
        tags: ['auth', 'providers'],
        summary: 'The provider tokens of the signed-in user (stored encrypted)',
        params: ProviderParam([...deps.registry.providers.keys()]),
        response: { 200: Tokens, ...errorResponses(401, 404, 429, 500) },
      },
    },
    async (request) => {
      // The caller's account is checked before the provider name (a deleted account is 401, not 404).
      return readProviderTokens(deps, request.user['user-id'], request.params.provider);
    },
  );
};
