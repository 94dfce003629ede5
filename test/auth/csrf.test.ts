/**
 * Cross-site request forgery on cookie sessions. A page on any site can make the browser send a POST
 * (a form, a fetch) that carries the session cookies; such a request must not act as the user. Only a
 * request that shows it comes from the service's own origin or an allowed one may use a cookie as its
 * credential for anything but GET/HEAD/OPTIONS. Bearer requests and requests without cookies are not
 * concerned.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { bearer, count, HS, login, setCookies, signUp } from './helpers.ts';

const EVIL = 'https://evil.example';
const SERVER = 'https://auth.example.com';
const APP = 'https://app.example.com';

/** A signed-in browser: the account, its cookies as the browser keeps them, and a bearer token. */
async function browser(t: TestApp) {
  const s = await signUp(t);
  const res = await login(t, { email: s.email, password: s.password });
  assert.equal(res.statusCode, 200, res.body);
  const jar = setCookies(res);
  return {
    ...s,
    jwt: res.json().jwt_token as string,
    cookies: {
      permission_variables: jar.permission_variables?.value as string,
      refresh_token: jar.refresh_token?.value as string,
    },
  };
}

function assertCsrf(res: LightMyRequestResponse, what: string): void {
  assert.equal(res.statusCode, 403, `${what}: ${res.body}`);
  const body = res.json();
  assert.equal(body.code, 'CSRF', what);
  assert.match(body.message, /Origin/, what);
}

const accounts = (t: TestApp, userId: string) =>
  count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE user_id = $1', [userId]);
const sessions = (t: TestApp, userId: string) =>
  count(
    t,
    'SELECT count(*)::int AS n FROM auth.session_tokens s JOIN auth.accounts a ON a.id = s.account_id WHERE a.user_id = $1',
    [userId],
  );

/** Headers a browser sends, or that a cross-site attacker's page makes it send. */
const CROSS_SITE: Record<string, Record<string, string>> = {
  'Origin of another site': { origin: EVIL },
  'Origin: null (sandboxed frame)': { origin: 'null' },
  'Origin of a look-alike host': { origin: 'https://auth.example.com.evil.example' },
  'no Origin, Sec-Fetch-Site: cross-site': { 'sec-fetch-site': 'cross-site' },
  'no Origin, Sec-Fetch-Site: same-site (a sibling subdomain)': { 'sec-fetch-site': 'same-site' },
  'no Origin, Referer of another site': { referer: `${EVIL}/page` },
  'no Origin, no Referer, no Sec-Fetch-Site': {},
};

for (const kind of dbKinds()) {
  describe(`CSRF on cookie sessions [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        ALLOW_USER_SELF_DELETE: true,
        SERVER_URL: SERVER,
        CORS_ORIGINS: [APP],
        ALLOWED_REDIRECT_URLS: ['https://links.example.net/welcome/*'],
      });
    });
    after(() => t.close());

    it('an empty cross-site POST /auth/delete with the session cookie does not delete the account', async () => {
      const b = await browser(t);
      for (const [what, headers] of Object.entries(CROSS_SITE)) {
        const res = await t.app.inject({ method: 'POST', url: '/auth/delete', headers, cookies: b.cookies });
        assertCsrf(res, what);
        assert.equal(setCookies(res).permission_variables, undefined, `${what}: cookies left alone`);
      }
      assert.equal(await accounts(t, b.userId), 1, 'the account still exists');
      assert.equal((await login(t, { email: b.email, password: b.password })).statusCode, 200);
    });

    it('a cross-site logout with the refresh cookie does not end the sign-in', async () => {
      const b = await browser(t);
      const before = await sessions(t, b.userId);
      for (const payload of [undefined, { all: true }]) {
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/logout',
          headers: { origin: EVIL },
          cookies: { refresh_token: b.cookies.refresh_token },
          ...(payload ? { payload } : {}),
        });
        assertCsrf(res, JSON.stringify(payload));
      }
      assert.equal(await sessions(t, b.userId), before);
      const refreshed = await t.app.inject({
        method: 'GET',
        url: '/auth/token/refresh',
        cookies: { refresh_token: b.cookies.refresh_token },
      });
      assert.equal(refreshed.statusCode, 200, 'the cookie still refreshes');
    });

    it('a cross-site token revoke with the session cookie ends no session', async () => {
      const b = await browser(t);
      const before = await sessions(t, b.userId);
      assert.ok(before >= 2);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/token/revoke',
        headers: { origin: EVIL },
        cookies: b.cookies,
      });
      assertCsrf(res, 'revoke');
      assert.equal(await sessions(t, b.userId), before);
    });

    it('a cross-site MFA generate with the session cookie stores no secret', async () => {
      const b = await browser(t);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/generate',
        headers: { origin: EVIL },
        cookies: b.cookies,
      });
      assertCsrf(res, 'mfa generate');
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.account_mfa m JOIN auth.accounts a ON a.id = m.account_id WHERE a.user_id = $1 AND m.pending_secret IS NOT NULL',
          [b.userId],
        ),
        0,
      );
    });

    it('a cross-site storage upload or delete with the session cookie is refused', async () => {
      const b = await browser(t);
      const url = `/storage/o/user/${b.userId}/note.txt`;
      const mp = multipartBody([{ name: 'file', filename: 'note.txt', type: 'text/plain', data: 'mine' }]);
      const put = (headers: Record<string, string>, data = mp) =>
        t.app.inject({
          method: 'POST',
          url,
          payload: data.payload,
          headers: { ...data.headers, ...headers },
          cookies: b.cookies,
        });
      assertCsrf(await put({ origin: EVIL }), 'cross-site upload');
      assert.equal((await t.app.inject({ url, headers: bearer(b.jwt) })).statusCode, 404, 'nothing stored');

      assert.equal((await put({ origin: SERVER })).statusCode, 200, 'same-origin upload');
      const overwrite = multipartBody([{ name: 'file', filename: 'x', type: 'text/plain', data: 'evil' }]);
      assertCsrf(await put({ origin: EVIL }, overwrite), 'cross-site overwrite');
      const del = await t.app.inject({
        method: 'DELETE',
        url,
        headers: { origin: EVIL },
        cookies: b.cookies,
      });
      assertCsrf(del, 'cross-site delete');
      const kept = await t.app.inject({ url, headers: bearer(b.jwt) });
      assert.equal(kept.statusCode, 200);
      assert.equal(kept.body, 'mine');
      // Reading by cookie changes nothing and is not concerned.
      const read = await t.app.inject({ url, headers: { origin: EVIL }, cookies: b.cookies });
      assert.equal(read.statusCode, 200);
    });

    it('accepts cookie requests from the service, allowed origins, and same-origin browsers', async () => {
      const allowed: Record<string, Record<string, string>> = {
        'Origin of SERVER_URL': { origin: SERVER },
        'Origin of CORS_ORIGINS': { origin: APP },
        'Origin of ALLOWED_REDIRECT_URLS': { origin: 'https://links.example.net' },
        // inject() sends Host: localhost:80; a page served from there is this service too.
        "the request's own origin": { origin: 'http://localhost' },
        'Sec-Fetch-Site: same-origin without Origin': { 'sec-fetch-site': 'same-origin' },
        'same-origin Referer without Origin': { referer: `${SERVER}/settings?tab=security` },
        'allowed Referer without Origin': { referer: `${APP}/account` },
      };
      for (const [what, headers] of Object.entries(allowed)) {
        const b = await browser(t);
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/token/revoke',
          headers,
          cookies: b.cookies,
        });
        assert.equal(res.statusCode, 204, `${what}: ${res.body}`);
        assert.equal(await sessions(t, b.userId), 0, what);
      }
      const b = await browser(t);
      const out = await t.app.inject({
        method: 'POST',
        url: '/auth/logout',
        headers: { origin: APP },
        cookies: { refresh_token: b.cookies.refresh_token },
      });
      assert.equal(out.statusCode, 204);
      // The logout ended that session, its access-token cookie included: delete from another sign-in.
      const c = await browser(t);
      const gone = await t.app.inject({
        method: 'POST',
        url: '/auth/delete',
        headers: { origin: SERVER },
        cookies: c.cookies,
      });
      assert.equal(gone.statusCode, 204);
      assert.equal(await accounts(t, c.userId), 0);
    });

    it('leaves bearer requests alone, from any origin and with cookies beside them', async () => {
      const b = await browser(t);
      const mfa = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/generate',
        headers: { ...bearer(b.jwt), origin: EVIL },
        cookies: b.cookies,
      });
      assert.equal(mfa.statusCode, 200, mfa.body);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/delete',
        headers: { ...bearer(b.jwt), origin: EVIL },
      });
      assert.equal(res.statusCode, 204);
      assert.equal(await accounts(t, b.userId), 0);
    });

    it('leaves requests without a cookie credential alone', async () => {
      const s = await signUp(t);
      const signIn = await login(
        t,
        { email: s.email, password: s.password, cookie: false },
        { origin: EVIL },
      );
      assert.equal(signIn.statusCode, 200);
      const out = await t.app.inject({
        method: 'POST',
        url: `/auth/logout?refresh_token=${encodeURIComponent(signIn.json().refresh_token)}`,
        headers: { origin: EVIL },
      });
      assert.equal(out.statusCode, 204);
      // A tampered cookie is no credential: the request is simply anonymous.
      const anon = await t.app.inject({
        method: 'POST',
        url: '/auth/token/revoke',
        headers: { origin: EVIL },
        cookies: { permission_variables: 'tampered.value' },
      });
      assert.equal(anon.statusCode, 401);
    });
  });
}

describe('CSRF check with development defaults (CORS_ORIGINS unset)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, RATE_LIMIT_ENABLED: false });
  });
  after(() => t.close());

  it('accepts a localhost dev server, as CORS does, and still refuses other sites', async () => {
    const b = await browser(t);
    const cross = await t.app.inject({
      method: 'POST',
      url: '/auth/token/revoke',
      headers: { origin: EVIL },
      cookies: b.cookies,
    });
    assertCsrf(cross, 'cross-site');
    const dev = await t.app.inject({
      method: 'POST',
      url: '/auth/token/revoke',
      headers: { origin: 'http://localhost:5173' },
      cookies: b.cookies,
    });
    assert.equal(dev.statusCode, 204);
  });
});

describe('session cookies in production', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', {
      ...HS,
      NODE_ENV: 'production',
      // The test helper passes its own database; the URL only satisfies the production check.
      DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
      COOKIE_SECRET: 'c'.repeat(32),
      MFA_ENCRYPTION_KEY: 'm'.repeat(32),
      RATE_LIMIT_ENABLED: false,
    });
  });
  after(() => t.close());

  it('are Secure by default, so they never travel over plain HTTP', async () => {
    const s = await signUp(t);
    const res = await login(t, { email: s.email, password: s.password });
    assert.equal(res.statusCode, 200, res.body);
    const cookies = res.cookies as { name: string; secure?: boolean; httpOnly?: boolean }[];
    assert.deepEqual(cookies.map((c) => [c.name, c.secure, c.httpOnly]).sort(), [
      ['permission_variables', true, true],
      ['refresh_token', true, true],
    ]);
  });
});
