/**
 * POST /auth/providers/<provider>/unlink: the signed-in user removes a linked provider, while another
 * way to sign in remains. A sensitive change: a recent sign-in or the current `password`.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type OAuthDeps, unlinkProvider } from '../../flows/oauth.ts';
import type { ProviderName } from '../../oauth/providers.ts';
import { errors, NoContent, ReauthPassword } from '../../schemas.ts';
import { bodyDefaultsToObject, reauthentication } from '../common.ts';
import { ProviderParam, providerOf } from './common.ts';

export async function providerUnlinkRoute(
  app: FastifyInstance,
  { deps }: { deps: OAuthDeps },
): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/providers/:provider/unlink',
    {
      schema: {
        tags: ['auth', 'providers'],
        summary: 'Unlink a provider from the signed-in user’s account',
        security: [{ bearer: [] }],
        params: ProviderParam([...deps.registry.providers.keys()]),
        body: Type.Object({ password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
        response: { 204: NoContent, ...errors(400, 401, 403, 404, 409, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      const who = await request.requireUser();
      const provider = providerOf(deps, request.params.provider);
      await unlinkProvider(
        deps,
        who['user-id'],
        provider.name as ProviderName,
        reauthentication(request, request.body.password),
      );
      return reply.code(204).send(null);
    },
  );
}
