/**
 * Hasura's auth webhook (HASURA_GRAPHQL_AUTH_HOOK, GET mode): the session variables of a request, from the
 * access token the client sent to the engine (which forwards its headers). Unlike JWT mode, where the
 * engine trusts a token until it expires, every GraphQL request comes through here, so an ended session or
 * a blocked account is refused at once. Hasura knows only two answers: 200 with the variables, 401 to deny.
 */
import type { PermissionVariables } from '../auth/jwt.ts';
import { AppError } from '../errors.ts';

/** `user-id` → `X-Hasura-User-Id`, as Hasura names session variables. */
function variableName(claim: string): string {
  return `X-Hasura-${claim
    .split('-')
    .map((w) => (w === '' ? w : w[0]?.toUpperCase() + w.slice(1)))
    .join('-')}`;
}

/** Array claims as PostgreSQL array literals (Hasura's session variables are strings). */
function asString(v: string | string[]): string {
  return Array.isArray(v) ? `{${v.map((x) => `"${x.replace(/["\\]/g, '\\$&')}"`).join(',')}}` : v;
}

/**
 * The webhook's 200 body for a caller: every claim of the token as a string variable, and the role, which
 * is the requested `x-hasura-role` when the token allows it (refused with 401 otherwise: Hasura treats any
 * other status as an error of the hook) and the default role without one. `vars` undefined: no token,
 * which gets `anonymousRole` when one is configured and 401 otherwise.
 */
export function hasuraSession(
  vars: PermissionVariables | undefined,
  requestedRole: string | undefined,
  anonymousRole: string,
): Record<string, string> {
  if (!vars) {
    if (anonymousRole === '') throw new AppError('UNAUTHENTICATED');
    return { 'X-Hasura-Role': anonymousRole };
  }
  if (requestedRole !== undefined && !vars['allowed-roles'].includes(requestedRole))
    throw new AppError('ROLE_NOT_ALLOWED');
  const out: Record<string, string> = {};
  for (const [claim, value] of Object.entries(vars)) out[variableName(claim)] = asString(value);
  out['X-Hasura-Role'] = requestedRole ?? vars['default-role'];
  return out;
}
