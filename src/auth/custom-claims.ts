/**
 * Custom claims: the application adds its own keys to the Hasura claims of every access token, from
 * its own data, through a PostgreSQL function (JWT_CLAIMS_FUNCTION) and/or an HTTP hook
 * (JWT_CLAIMS_HOOK_URL, signed as Standard Webhooks). Both run on every sign-in and refresh, before the
 * session is stored, so a failure stores nothing.
 *
 * Fail closed: a hook that fails, times out, answers badly or names a claim only the service sets
 * (user id, roles, `sub`, `sid`…) refuses the token with CLAIMS_HOOK_FAILED (503). Dropping the key, or
 * issuing the token without the app's claims, would hand out a token the app's permissions were not
 * written for; the reason is logged (never the secret), the client sees only the code.
 */
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../config.ts';
import type { Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import type { AccountProfile } from './accounts-store.ts';
import { RESERVED_CLAIMS } from './claim-names.ts';
import { claimValue, type PermissionVariables } from './jwt.ts';

/** Keys no hook may set: the service's own claims, and the registered JWT claims beside them. */
const RESERVED = new Set([
  ...RESERVED_CLAIMS,
  'sub',
  'sid',
  'iss',
  'aud',
  'exp',
  'iat',
  'nbf',
  'jti',
  'auth_time',
  'auth-time',
]);

/** A claim name as Hasura reads it: lower case (session variables are case-insensitive), short. */
const CLAIM_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** The most keys one answer may add, and the largest answer read from the hook. */
const MAX_KEYS = 50;
const MAX_ANSWER_BYTES = 64 * 1024;

/** The session a token is issued for, as the hook is told. */
export interface ClaimsSession {
  id: string;
  /** password, magic-link, mfa, oauth:<provider>, email-otp… (null: not recorded). */
  method: string | null;
}

/** Whether either hook is configured (nothing to do otherwise). */
export function customClaimsConfigured(config: Config): boolean {
  return config.JWT_CLAIMS_FUNCTION !== '' || config.JWT_CLAIMS_HOOK_URL !== '';
}

class ClaimsRefused extends Error {
  override name = 'ClaimsRefused';
}

function failed(reason: string, cause?: unknown): AppError {
  // The reason goes to the log (the error handler logs the cause of a 5xx); the answer keeps the
  // catalogue's message, so a client learns nothing of the app's hook.
  return new AppError('CLAIMS_HOOK_FAILED', undefined, {
    cause: new ClaimsRefused(`custom claims refused: ${reason}`, { cause }),
  });
}

/** The service's claims as the hooks see them: with their `x-hasura-` prefix, as in the token. */
function prefixed(vars: PermissionVariables): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(vars).map(([k, v]) => [`x-hasura-${k}`, v]));
}

/**
 * The claims an answer adds, un-prefixed as permission variables are (`x-hasura-org-id` and `org-id`
 * both give `org-id`), values as Hasura takes them (strings; arrays as Postgres array literals).
 */
function checkedClaims(
  source: string,
  answer: unknown,
  existing: PermissionVariables,
): Record<string, string> {
  if (answer === null || answer === undefined) return {};
  if (typeof answer !== 'object' || Array.isArray(answer))
    throw failed(
      `${source} answered ${Array.isArray(answer) ? 'an array' : typeof answer}, not an object of claims`,
    );
  const entries = Object.entries(answer as Record<string, unknown>);
  if (entries.length > MAX_KEYS)
    throw failed(`${source} answered ${entries.length} claims (at most ${MAX_KEYS})`);
  const out: Record<string, string> = {};
  for (const [key, value] of entries) {
    const name = key.toLowerCase().startsWith('x-hasura-') ? key.slice('x-hasura-'.length) : key;
    const shown = JSON.stringify(key.slice(0, 70));
    if (!CLAIM_NAME.test(name))
      throw failed(`${source} answered the claim ${shown}: names are lower-case letters, digits, - and _`);
    // Refused, never dropped: a hook that tries to set these has a bug (or an attacker's input) to fix.
    if (RESERVED.has(name) || name in existing)
      throw failed(`${source} answered the claim ${shown}, which only the service sets`);
    if (value === null) continue;
    if (typeof value === 'object' && !Array.isArray(value))
      throw failed(
        `${source} answered an object for the claim ${shown}; use a string, number, boolean or array`,
      );
    out[name] = claimValue(value);
  }
  return out;
}

/** The answer of JWT_CLAIMS_FUNCTION, run in `db` (the issuing transaction). */
async function fromFunction(
  config: Config,
  db: Queryable,
  userId: string,
  claims: Record<string, unknown>,
): Promise<unknown> {
  // Validated at start as schema.name of plain identifiers (config.ts); quoted so case is kept as written.
  const [schema, name] = config.JWT_CLAIMS_FUNCTION.split('.') as [string, string];
  try {
    const { rows } = await db.query<{ claims: unknown }>(
      'CustomClaimsFunction',
      `SELECT "${schema}"."${name}"($1::uuid, $2::jsonb) AS claims`,
      [userId, JSON.stringify(claims)],
    );
    const value = rows[0]?.claims;
    return typeof value === 'string' ? JSON.parse(value) : value;
  } catch (err) {
    throw failed(
      `the function ${config.JWT_CLAIMS_FUNCTION} failed: ${String((err as Error)?.message ?? err).slice(0, 200)}`,
      err,
    );
  }
}

/** Reads at most MAX_ANSWER_BYTES of a response. */
async function boundedText(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel().catch(() => {});
      throw new Error(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The `claims` of JWT_CLAIMS_HOOK_URL's answer to a signed POST. */
async function fromHook(
  config: Config,
  now: Date,
  profile: AccountProfile,
  session: ClaimsSession,
  claims: Record<string, unknown>,
): Promise<unknown> {
  const body = JSON.stringify({
    user: {
      id: profile.user.id,
      email: profile.account.email,
      roles: profile.roles,
      default_role: profile.account.default_role,
    },
    session,
    claims,
  });
  const id = `msg_${randomUUID()}`;
  const signature = new Webhook(config.JWT_CLAIMS_HOOK_SECRET).sign(id, now, body);
  const timeoutMs = config.JWT_CLAIMS_HOOK_TIMEOUT_MS;
  let res: Response;
  let text: string;
  try {
    const signal = AbortSignal.timeout(timeoutMs);
    res = await fetch(config.JWT_CLAIMS_HOOK_URL, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': signature,
      },
      body,
      redirect: 'error',
      signal,
    });
    text = await boundedText(res);
  } catch (err) {
    const e = err as Error;
    const why =
      e?.name === 'TimeoutError'
        ? `no answer within ${timeoutMs} ms`
        : `${e?.message ?? e} ${(e?.cause as Error)?.message ?? ''}`;
    throw failed(
      `the hook ${new URL(config.JWT_CLAIMS_HOOK_URL).origin} could not be used: ${why.trim()}`,
      err,
    );
  }
  if (res.status !== 200) throw failed(`the hook answered HTTP ${res.status}, not 200`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw failed('the hook answered something that is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || !('claims' in parsed))
    throw failed('the hook answered JSON without a "claims" object');
  return (parsed as { claims: unknown }).claims;
}

/**
 * The permission variables of a token with the app's claims added: the function's (run in `db`, the
 * issuing transaction), then the hook's, which sees the service's claims and the function's. Throws
 * CLAIMS_HOOK_FAILED; `vars` itself is returned when no hook is configured.
 */
export async function withCustomClaims(
  config: Config,
  db: Queryable,
  now: Date,
  profile: AccountProfile,
  session: ClaimsSession,
  vars: PermissionVariables,
): Promise<PermissionVariables> {
  if (!customClaimsConfigured(config)) return vars;
  let out = vars;
  if (config.JWT_CLAIMS_FUNCTION !== '') {
    const answer = await fromFunction(config, db, profile.user.id, prefixed(out));
    out = { ...out, ...checkedClaims(`the function ${config.JWT_CLAIMS_FUNCTION}`, answer, out) };
  }
  if (config.JWT_CLAIMS_HOOK_URL !== '') {
    const answer = await fromHook(config, now, profile, session, prefixed(out));
    out = { ...out, ...checkedClaims('the hook', answer, out) };
  }
  return out;
}

/**
 * At start: whether JWT_CLAIMS_FUNCTION names a function that exists as `fn(uuid, jsonb)`. Said as a
 * warning, not a refusal: the function may be created by the app's own migrations after this service
 * starts; until then every sign-in and refresh answers 503 CLAIMS_HOOK_FAILED.
 */
export async function missingClaimsFunction(config: Config, db: Queryable): Promise<string | undefined> {
  if (config.JWT_CLAIMS_FUNCTION === '') return undefined;
  const [schema, name] = config.JWT_CLAIMS_FUNCTION.split('.') as [string, string];
  const { rows } = await db.query<{ found: boolean }>(
    'CustomClaimsFunctionExists',
    'SELECT to_regprocedure($1) IS NOT NULL AS found',
    [`"${schema}"."${name}"(uuid, jsonb)`],
  );
  if (rows[0]?.found) return undefined;
  return `JWT_CLAIMS_FUNCTION ${config.JWT_CLAIMS_FUNCTION}(user_id uuid, claims jsonb) does not exist yet: every sign-in and refresh answers 503 CLAIMS_HOOK_FAILED until it is created (docs/hooks.md)`;
}
