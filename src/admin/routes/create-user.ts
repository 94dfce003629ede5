/** POST /admin/users: creates an account, as `gatehouse users create` does. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AuthDeps } from '../../auth/deps.ts';
import { createUser, userDetails } from '../../auth/operator.ts';
import { Email } from '../../auth/schemas.ts';
import { errorResponses } from '../../errors.ts';
import { AdminUserDetails, adminUserDetails } from '../schemas.ts';

export const Role = Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\s,]+$' });

export const createUserRoute: FastifyPluginAsyncTypebox<{ deps: AuthDeps }> = async (app, { deps }) => {
  app.post(
    '/users',
    {
      schema: {
        summary: 'Create a user',
        description:
          'The operator vouches for the address (it counts as proven). Without `active` the account waits for activation; `send_invite` emails it the activation link. The password is checked as the routes check one (MIN_PASSWORD_LENGTH, the breach check when HIBP_ENABLED); ALLOWED_USER_ROLES does not limit an operator, but the roles must exist in auth.roles (400 UNKNOWN_ROLE). 400 ACCOUNT_EXISTS for a taken address.',
        body: Type.Object(
          {
            email: Email,
            password: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
            roles: Type.Optional(Type.Array(Role, { maxItems: 50 })),
            default_role: Type.Optional(Role),
            display_name: Type.Optional(Type.String({ maxLength: 200 })),
            active: Type.Optional(Type.Boolean({ default: false })),
            send_invite: Type.Optional(
              Type.Boolean({ description: 'Email the activation link (EMAILS_ENABLED; not with active).' }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 201: AdminUserDetails, ...errorResponses(400, 401, 403, 429, 503) },
      },
    },
    async (request, reply) => {
      const b = request.body;
      const made = await createUser(
        deps,
        {
          email: b.email,
          password: b.password,
          roles: b.roles,
          defaultRole: b.default_role,
          displayName: b.display_name,
          active: b.active ?? false,
          sendInvite: b.send_invite,
        },
        request.operator,
      );
      return reply.code(201).send(adminUserDetails(await userDetails(deps, made.userId)));
    },
  );
};
