/**
 * POST /auth/providers/<provider>/unlink: the signed-in user removes a linked provider, while another
 * way to sign in remains. A sensitive change: a recent sign-in or the current `password`.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import { type OAuthDeps, unlinkProvider } from '../../flows/oauth.ts';
import { NoContent, ReauthPassword } from '../../schemas.ts';
import { bodyDefaultsToObject, ownSignIn, reauthentication } from '../common.ts';
import { ProviderParam } from './common.ts';

export const providerUnlinkRoute: FastifyPluginAsyncTypebox<{ deps: OAuthDeps }> = async (app, { deps }) => {
  app.post(
    '/providers/:provider/unlink',
    {
      schema: {
        tags: ['auth', 'providers'],
        summary: 'Unlink a provider from the signed-in user’s account',
        params: ProviderParam([...deps.registry.providers.keys()]),
        body: Type.Object({ password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      // The caller's account is checked before the provider name (a deleted account is 401, not 404).
      await unlinkProvider(
        deps,
        request.user['user-id'],
        request.params.provider,
        reauthentication(request, request.body.password),
        ownSignIn(request),
      );
      return reply.code(204).send(null);
    },
  );
};
