/**
 * GET /auth/passkeys, PATCH and DELETE /auth/passkeys/{id} (signed in): the caller's passkeys. Another
 * account's, an unknown or a malformed id is 404. Deleting is a sensitive change (a recent sign-in or the
 * current `password`) and is refused with 409 LAST_SIGN_IN_METHOD when no way to sign in would remain.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../../../errors.ts';
import type { AuthDeps } from '../../deps.ts';
import { bodyDefaultsToObject, reauthentication } from '../../routes/common.ts';
import { NoContent, ReauthPassword } from '../../schemas.ts';
import { deleteOwnPasskey, ownPasskeys, renameOwnPasskey } from '../ceremonies.ts';
import { signedInOrigin } from './convert.ts';
import { Passkey, PasskeyName } from './schemas.ts';

const Params = Type.Object({ id: Type.String({ maxLength: 100 }) });

export const managePasskeyRoutes: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.get(
    '/',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Your passkeys, oldest first',
        response: { 200: Type.Array(Passkey), ...errorResponses(401, 403, 429, 503) },
      },
    },
    async (request) => ownPasskeys(deps, request.user['user-id']),
  );

  app.patch(
    '/:id',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Rename one of your passkeys',
        params: Params,
        body: Type.Object({ name: PasskeyName }, { additionalProperties: false }),
        response: { 200: Passkey, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => renameOwnPasskey(deps, request.user['user-id'], request.params.id, request.body.name),
  );

  app.delete(
    '/:id',
    {
      schema: {
        tags: ['passkeys'],
        summary: 'Delete one of your passkeys',
        description:
          'A sensitive change: a sign-in within SENSITIVE_ACTION_WINDOW seconds or the current `password` (in a JSON body). 409 LAST_SIGN_IN_METHOD when it is your only way to sign in. Remove it from your authenticator too.',
        params: Params,
        body: Type.Object({ password: Type.Optional(ReauthPassword) }, { additionalProperties: false }),
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409, 429, 503) },
      },
      preValidation: bodyDefaultsToObject,
    },
    async (request, reply) => {
      await deleteOwnPasskey(
        deps,
        request.user['user-id'],
        request.params.id,
        reauthentication(request, request.body.password),
        signedInOrigin(request),
      );
      return reply.code(204).send(null);
    },
  );
};
