/**
 * Hasura tracking of the auth tables (contract §10.4) and of storage.files. Gatehouse reads and writes PostgreSQL directly, but
 * apps query `public.users`, `auth.accounts` and their relationships through the GraphQL engine, so at
 * start, when HASURA_ENDPOINT is set, the tables are tracked and the relationships created, as HBP did.
 * Each call stands alone and its failure is only logged: "already tracked" is the normal answer on every
 * start after the first, and an engine that is down must not keep the service from starting.
 */
import type { FastifyBaseLogger } from 'fastify';

type Table = { schema: string; name: string };

const auth = (name: string): Table => ({ schema: 'auth', name });
const TRACKED: readonly Table[] = [
  auth('account_providers'),
  auth('account_roles'),
  auth('accounts'),
  auth('providers'),
  auth('refresh_tokens'),
  auth('roles'),
  auth('migrations'),
  auth('security_events'),
  { schema: 'public', name: 'users' },
  // One row per stored file (storage/files.ts). Tracking grants no role anything: the app adds select
  // permissions, and should leave out `token` (a credential to the file).
  { schema: 'storage', name: 'files' },
];

/** [table, relationship name, foreign-key column of that table] */
const OBJECT_RELATIONSHIPS: readonly [Table, string, string][] = [
  [auth('account_providers'), 'account', 'account_id'],
  [auth('account_providers'), 'provider', 'auth_provider'],
  [auth('account_roles'), 'account', 'account_id'],
  [auth('account_roles'), 'roleByRole', 'role'],
  [auth('accounts'), 'role', 'default_role'],
  [auth('accounts'), 'user', 'user_id'],
  [auth('refresh_tokens'), 'account', 'account_id'],
  [auth('security_events'), 'account', 'account_id'],
  [{ schema: 'storage', name: 'files' }, 'owner', 'owner_id'],
];

/** [table, relationship name, the referencing table, its foreign-key column] */
const ARRAY_RELATIONSHIPS: readonly [Table, string, Table, string][] = [
  [auth('accounts'), 'account_providers', auth('account_providers'), 'account_id'],
  [auth('accounts'), 'account_roles', auth('account_roles'), 'account_id'],
  [auth('accounts'), 'refresh_tokens', auth('refresh_tokens'), 'account_id'],
  [auth('accounts'), 'security_events', auth('security_events'), 'account_id'],
  [auth('providers'), 'account_providers', auth('account_providers'), 'auth_provider'],
  [auth('roles'), 'account_roles', auth('account_roles'), 'role'],
  [auth('roles'), 'accounts', auth('accounts'), 'default_role'],
  [{ schema: 'public', name: 'users' }, 'files', { schema: 'storage', name: 'files' }, 'owner_id'],
];

/**
 * The security feed under row permissions: a signed-in user (the default user role) reads their own
 * account's events and nothing else, the same rows GET /auth/security-events answers. An example to extend
 * (another role, fewer columns); the engine keeps a permission made by hand ("already exists" is logged).
 */
function securityEventsPermission(role: string) {
  return {
    type: 'create_select_permission',
    args: {
      table: auth('security_events'),
      role,
      permission: {
        columns: ['id', 'type', 'created_at', 'ip', 'user_agent', 'session_id', 'details'],
        filter: { account: { user_id: { _eq: 'X-Hasura-User-Id' } } },
      },
    },
  };
}

/**
 * The metadata calls, in order: tables first, then the relationships between them, then the permission
 * that lets `userRole` read its own security feed.
 */
export function metadataCalls(userRole = 'user'): { type: string; args: Record<string, unknown> }[] {
  return [
    ...TRACKED.map((table) => ({ type: 'track_table', args: { ...table } })),
    ...OBJECT_RELATIONSHIPS.map(([table, name, column]) => ({
      type: 'create_object_relationship',
      args: { table, name, using: { foreign_key_constraint_on: column } },
    })),
    {
      type: 'create_object_relationship',
      args: {
        table: { schema: 'public', name: 'users' },
        name: 'account',
        using: {
          manual_configuration: { remote_table: auth('accounts'), column_mapping: { id: 'user_id' } },
        },
      },
    },
    ...ARRAY_RELATIONSHIPS.map(([table, name, from, column]) => ({
      type: 'create_array_relationship',
      args: { table, name, using: { foreign_key_constraint_on: { table: from, column } } },
    })),
    securityEventsPermission(userRole),
  ];
}

/** HBP's address for metadata calls: the GraphQL endpoint with `/v1/graphql` replaced by `/v1/query`. */
export function queryEndpoint(graphqlEndpoint: string): string {
  return graphqlEndpoint.replace('/v1/graphql', '/v1/query');
}

/**
 * Sends every call to the engine; resolves with how many it accepted. Never rejects: each failure
 * (refused, "already exists", timeout) is logged at debug level and the next call goes on.
 */
export async function applyHasuraMetadata(
  opts: { endpoint: string; adminSecret: string; timeoutMs?: number; userRole?: string },
  log: FastifyBaseLogger,
): Promise<{ accepted: number; failed: number }> {
  const url = queryEndpoint(opts.endpoint);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.adminSecret) headers['x-hasura-admin-secret'] = opts.adminSecret;
  let accepted = 0;
  let failed = 0;
  for (const call of metadataCalls(opts.userRole)) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(call),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 5000),
      });
      const text = await res.text();
      if (res.ok) accepted++;
      else {
        failed++;
        log.debug(
          { call: call.type, args: call.args, status: res.status, answer: text.slice(0, 300) },
          'hasura',
        );
      }
    } catch (err) {
      failed++;
      log.debug({ call: call.type, err: (err as Error).message }, 'hasura metadata call failed');
    }
  }
  log.info(
    { endpoint: url, accepted, failed },
    'Hasura metadata applied (failures are usually "already tracked")',
  );
  return { accepted, failed };
}
