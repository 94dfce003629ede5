/** PATCH /admin/users/{id}: roles, block, address, its proof, display name; all or nothing. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { accountOfUser, updateUser } from '../../auth/operator.ts';
import { Email } from '../../auth/schemas.ts';
import { errorResponses } from '../../errors.ts';
import { AdminUser, adminUser, UserIdParams } from '../schemas.ts';
import { Role } from './create-user.ts';

export const updateUserRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.patch(
    '/users/:id',
    {
      schema: {
        summary: 'Change a user',
        description:
          '`disabled: true` blocks the account and ends every session at once (its access tokens are refused within a second on every instance); `false` lifts the block (and activates an account still waiting). Taking a role away (or changing the default role) ends its sessions, so no token keeps a lost role; an added role reaches its tokens at the next refresh. A new `email` is in force at once, not proven unless `email_verified: true`, and the account’s open links stop working.',
        params: UserIdParams,
        body: Type.Object(
          {
            roles: Type.Optional(Type.Array(Role, { maxItems: 50 })),
            default_role: Type.Optional(Role),
            disabled: Type.Optional(Type.Boolean()),
            email: Type.Optional(Email),
            email_verified: Type.Optional(Type.Boolean()),
            display_name: Type.Optional(Type.String({ maxLength: 200 })),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: AdminUser, ...errorResponses(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => {
      const b = request.body;
      const account = await accountOfUser(deps.db, request.params.id);
      const now = await updateUser(
        deps,
        account,
        {
          roles: b.roles,
          defaultRole: b.default_role,
          disabled: b.disabled,
          email: b.email,
          emailVerified: b.email_verified,
          displayName: b.display_name,
        },
        request.operator,
      );
      return adminUser(now);
    },
  );
};
