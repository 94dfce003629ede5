/**
 * Who may call the admin API: whoever sends the admin secret (`x-hasura-admin-secret`, or the
 * `x-admin-secret` the storage and login routes read), compared in constant time and limited as a guess
 * (a wrong one counts against the same limits as everywhere, http/guesses.ts), or the bearer of an access
 * token whose roles include ADMIN_ROLE (unset: nobody by role). The check runs before the request is
 * validated, so a caller who is not an administrator learns nothing of the routes' inputs: no token is
 * 401, a token without the role 403 ADMIN_REQUIRED, a wrong secret 401 INVALID_ADMIN_SECRET.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Operator } from '../auth/operator.ts';
import type { Config } from '../config.ts';
import { secretsEqual } from '../constant-time.ts';
import { AppError } from '../errors.ts';
import { ADMIN_SECRET_SUBJECT } from '../http/guesses.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The administrator calling an admin route (set by the admin context's hook; elsewhere it throws). */
    operator: Operator;
  }
}

/** The OpenAPI security of every admin route: either secret header, or a bearer token with ADMIN_ROLE. */
export const ADMIN_SECURITY: { [scheme: string]: string[] }[] = [
  { hasuraAdminSecret: [] },
  { adminSecret: [] },
  { bearer: [] },
];

/** The admin secret a request sends, if any (x-hasura-admin-secret first). */
function sentSecret(request: FastifyRequest): string | undefined {
  for (const name of ['x-hasura-admin-secret', 'x-admin-secret']) {
    const v = request.headers[name];
    if (typeof v === 'string' && v !== '') return v;
  }
  return undefined;
}

/** Decides who the caller is, or throws the refusal. */
export async function adminOf(request: FastifyRequest, config: Config): Promise<Operator> {
  const secret = sentSecret(request);
  if (secret !== undefined) {
    const configured = config.HASURA_GRAPHQL_ADMIN_SECRET;
    if (configured === '')
      throw new AppError(
        'INVALID_ADMIN_SECRET',
        'This server has no admin secret (HASURA_GRAPHQL_ADMIN_SECRET is empty): use an access token with ADMIN_ROLE.',
      );
    const right = await request.server.guesses.guard(ADMIN_SECRET_SUBJECT, request.ip, () =>
      secretsEqual(secret, configured),
    );
    if (!right) throw new AppError('INVALID_ADMIN_SECRET');
    return { via: 'admin-secret' };
  }
  const who = await request.identity();
  if (!who) throw new AppError('UNAUTHENTICATED');
  const role = config.ADMIN_ROLE;
  if (role === '' || !who['allowed-roles'].includes(role)) throw new AppError('ADMIN_REQUIRED');
  return { via: 'admin-role', userId: who['user-id'] };
}

/**
 * Makes `scope` an admin context: each route registered in it is documented with ADMIN_SECURITY and
 * tagged "admin", and its caller is checked (adminOf) before anything else about the request.
 */
export function adminContext(scope: FastifyInstance, config: Config): void {
  const operators = new WeakMap<FastifyRequest, Operator>();
  scope.decorateRequest('operator', {
    getter(this: FastifyRequest) {
      const op = operators.get(this);
      if (!op) throw new Error('request.operator is only set on an admin route');
      return op;
    },
  });
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, tags: ['admin'], security: ADMIN_SECURITY };
  });
  scope.addHook('preValidation', async (request) => {
    operators.set(request, await adminOf(request, config));
  });
}
