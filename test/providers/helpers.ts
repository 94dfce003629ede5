/** Shared pieces of the provider sign-in suites. */
import assert from 'node:assert/strict';
import type { TestApp } from '../helpers/app.ts';
import type { Page } from '../helpers/browser.ts';

export const SERVICE = 'http://gatehouse.test';
export const SUCCESS = 'http://app.test/signed-in';
export const FAILURE = 'http://app.test/sign-in-failed';

export const callback = (provider: string) => `${SERVICE}/auth/providers/${provider}/callback`;

/** The app URL a sign-in ended on. */
export function landing(page: Page): URL {
  assert.equal(page.status, 302, `expected a redirect, got ${page.status}: ${page.body}`);
  return new URL(page.location as string);
}

/** Asserts the sign-in failed with `code` (302 to the failure URL with error=code). */
export function assertFailed(page: Page, code: string): void {
  const to = landing(page);
  assert.equal(to.origin + to.pathname, FAILURE, `landed on ${to}`);
  assert.equal(to.searchParams.get('error'), code);
  assert.equal(to.searchParams.get('refresh_token'), null);
}

/** Asserts the sign-in succeeded and returns its refresh token. */
export function refreshTokenOf(page: Page, target = SUCCESS): string {
  const to = landing(page);
  assert.equal(to.origin + to.pathname, target, `landed on ${to}`);
  const token = to.searchParams.get('refresh_token');
  assert.ok(token, `no refresh_token in ${to}`);
  return token;
}

/** The session (access token, user) a refresh token stands for. */
export async function sessionOf(t: TestApp, refreshToken: string) {
  const res = await t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refreshToken}` });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as {
    jwt_token: string;
    refresh_token: string;
    user: { id: string; email: string | null; display_name: string | null; avatar_url?: string };
  };
}

export async function linksOf(
  t: TestApp,
  userId: string,
): Promise<{ auth_provider: string; auth_provider_unique_id: string }[]> {
  const { rows } = await t.ctx.db.query<{ auth_provider: string; auth_provider_unique_id: string }>(
    'test-links',
    `SELECT p.auth_provider, p.auth_provider_unique_id FROM auth.account_providers p
       JOIN auth.accounts a ON a.id = p.account_id WHERE a.user_id = $1 ORDER BY p.auth_provider`,
    [userId],
  );
  return rows;
}

export async function accountCount(t: TestApp): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>(
    'test-count',
    'SELECT count(*)::int AS n FROM auth.accounts',
  );
  return Number(rows[0]?.n);
}

/**
 * An account whose address is proven, signed in: made as `gatehouse users create` makes one (the
 * operator vouches for the address), then signed in with its password through the login route. Provider
 * sign-in links by email only to such an account (docs/security.md).
 */
export async function provenAccount(
  t: TestApp,
  email: string,
  password = 'correct horse battery',
): Promise<{ email: string; password: string; jwt: string; userId: string }> {
  const { createUser } = await import('../../src/auth/operator.ts');
  const { authDeps } = await import('../../src/context.ts');
  const { userId } = await createUser(authDeps(t.ctx), { email, password, active: true });
  const res = await t.app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password, cookie: false },
  });
  assert.equal(res.statusCode, 200, res.body);
  return { email, password, jwt: res.json().jwt_token, userId };
}
