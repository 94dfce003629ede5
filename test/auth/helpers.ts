/** Helpers for the auth suites: sign-up and sign-in through the real routes, cookies and bearer headers. */
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { newEmail } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';

export { HS, HS_KEY, newEmail } from '../helpers/accounts.ts';

export interface Signed {
  email: string;
  password: string;
  jwt: string;
  refreshToken: string;
  userId: string;
}

export async function register(t: TestApp, body: Record<string, unknown>): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url: '/auth/register', payload: body });
}

/** Registers an active account and signs in with `cookie: false`, returning its tokens. */
export async function signUp(
  t: TestApp,
  email = newEmail(),
  password = 'correct horse battery',
): Promise<Signed> {
  const r = await register(t, { email, password, cookie: false });
  assert.equal(r.statusCode, 200, r.body);
  const body = r.json();
  return { email, password, jwt: body.jwt_token, refreshToken: body.refresh_token, userId: body.user.id };
}

export async function login(t: TestApp, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/auth/login', payload: body, headers });
}

export const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });

/** Cookies a response set, by name (values still signed, as a browser would keep them). */
export function setCookies(res: LightMyRequestResponse): Record<string, { value: string; maxAge?: number }> {
  const out: Record<string, { value: string; maxAge?: number }> = {};
  for (const c of res.cookies as { name: string; value: string; maxAge?: number }[]) {
    out[c.name] = { value: c.value, maxAge: c.maxAge };
  }
  return out;
}

export async function count(t: TestApp, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>('test-count', sql, params);
  return Number(rows[0]?.n ?? 0);
}

/** Rows that say what the database holds, for "nothing changed" checks. */
export async function snapshot(t: TestApp): Promise<string> {
  const parts = await Promise.all(
    ['public.users', 'auth.accounts', 'auth.account_roles', 'auth.session_tokens', 'auth.tickets'].map(
      async (table) => `${table}:${await count(t, `SELECT count(*)::int AS n FROM ${table}`)}`,
    ),
  );
  const { rows } = await t.ctx.db.query<{ h: string }>(
    'test-hash',
    `SELECT md5(coalesce(string_agg(a.email::text || coalesce(a.password_hash, '') || a.active::text, ',' ORDER BY a.id), '')) AS h FROM auth.accounts a`,
  );
  return `${parts.join(' ')} ${rows[0]?.h}`;
}
