import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { bearer, count, HS, login, newEmail, setCookies, signUp } from './helpers.ts';

const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

for (const kind of dbKinds()) {
  describe(`POST /auth/change-password [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    const change = (t: TestApp, jwt: string, payload: unknown, cookies?: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url: '/auth/change-password',
        payload: payload as never,
        headers: bearer(jwt),
        cookies,
      });

    it('changes the password and ends the other sessions', async () => {
      const s = await signUp(t);
      t.clock.advance(2000);
      const mine = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await change(t, mine.jwt_token, {
        old_password: s.password,
        new_password: 'brand new password',
      });
      assert.equal(res.statusCode, 204, res.body);
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 401);
      assert.equal((await login(t, { email: s.email, password: 'brand new password' })).statusCode, 200);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
      assert.equal((await refresh(t, mine.refresh_token)).statusCode, 200);
    });

    it("keeps the caller's own sign-in when it presents its refresh cookie", async () => {
      const s = await signUp(t);
      const jar = setCookies(await login(t, { email: s.email, password: s.password }));
      const res = await change(
        t,
        s.jwt,
        { old_password: s.password, new_password: 'brand new password' },
        {
          refresh_token: jar.refresh_token?.value as string,
        },
      );
      assert.equal(res.statusCode, 204);
      const mine = await t.app.inject({
        method: 'GET',
        url: '/auth/token/refresh',
        cookies: { refresh_token: jar.refresh_token?.value as string },
      });
      assert.equal(mine.statusCode, 200);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
    });

    it('keeps the sign-in of a bearer-only caller (the one its access token came from)', async () => {
      const s = await signUp(t);
      t.clock.advance(2000);
      const other = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await change(t, s.jwt, { old_password: s.password, new_password: 'brand new password' });
      assert.equal(res.statusCode, 204);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 200, 'own sign-in survives');
      assert.equal((await refresh(t, other.refresh_token)).statusCode, 401, 'the other one ends');
    });

    it('answers 401 Incorrect current password. and changes nothing', async () => {
      const s = await signUp(t);
      const res = await change(t, s.jwt, { old_password: 'wrong', new_password: 'brand new password' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().message, 'Incorrect current password.');
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 200);
    });

    it('requires old_password when the account has a password', async () => {
      const s = await signUp(t);
      const res = await change(t, s.jwt, { new_password: 'brand new password' });
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().message, '"old_password" is required');
    });

    it('sets a first password without old_password on an account that has none', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = NULL WHERE email = $1', [s.email]);
      assert.equal((await change(t, s.jwt, { new_password: 'first password' })).statusCode, 204);
      assert.equal((await login(t, { email: s.email, password: 'first password' })).statusCode, 200);
    });

    it('requires new_password with the length rule', async () => {
      const s = await signUp(t);
      const missing = await change(t, s.jwt, { old_password: s.password });
      assert.equal(missing.json().message, '"new_password" is required');
      const short = await change(t, s.jwt, { old_password: s.password, new_password: 'ab' });
      assert.equal(short.json().message, '"new_password" length must be at least 8 characters long');
    });
  });

  describe(`POST /auth/change-email [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        ALLOWED_EMAIL_DOMAINS: ['example.com'],
      });
    });
    after(() => t.close());

    const change = (t: TestApp, jwt: string, new_email: unknown) =>
      t.app.inject({
        method: 'POST',
        url: '/auth/change-email',
        payload: { new_email } as never,
        headers: bearer(jwt),
      });

    it('changes the email at once', async () => {
      const s = await signUp(t);
      const next = newEmail('moved');
      assert.equal((await change(t, s.jwt, next)).statusCode, 204);
      assert.equal((await login(t, { email: next, password: s.password })).statusCode, 200);
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 401);
    });

    it('answers 204 for an address in use, in any case, and moves nothing (no enumeration)', async () => {
      const a = await signUp(t);
      const b = await signUp(t);
      const res = await change(t, b.jwt, a.email.toUpperCase().replace('EXAMPLE.COM', 'example.com'));
      assert.equal(res.statusCode, 204);
      assert.equal((await login(t, { email: a.email, password: a.password })).statusCode, 200);
      assert.equal((await login(t, { email: b.email, password: b.password })).statusCode, 200);
    });

    it('refuses a domain outside ALLOWED_EMAIL_DOMAINS', async () => {
      const s = await signUp(t);
      const res = await change(t, s.jwt, 'x@elsewhere.org');
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().message, '"new_email" is not in an authorised domain');
    });
  });

  describe(`POST /auth/delete [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, ALLOW_USER_SELF_DELETE: true });
    });
    after(() => t.close());

    it('deletes the public.users row and everything hanging off it', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: '/auth/delete', headers: bearer(s.jwt) });
      assert.equal(res.statusCode, 204);
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM public.users WHERE id = $1', [s.userId]),
        0,
      );
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE user_id = $1', [s.userId]),
        0,
      );
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 401);
      // The deleted user's access token is refused at once (it is revoked), not only its refresh token.
      const again = await t.app.inject({ method: 'POST', url: '/auth/delete', headers: bearer(s.jwt) });
      assert.equal(again.statusCode, 401);
      assert.match(again.json().message, /session of this access token has ended/);
    });
  });

  describe(`gating [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, VERIFY_EMAILS: true });
    });
    after(() => t.close());

    it('answers 404 with the error body for /auth/delete when ALLOW_USER_SELF_DELETE is false', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: '/auth/delete', headers: bearer(s.jwt) });
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'Not Found',
        code: 'NOT_FOUND',
      });
      assert.equal(res.headers['cache-control'], 'no-store, no-cache, must-revalidate, proxy-revalidate');
    });

    it('answers 404 for /auth/change-email when VERIFY_EMAILS is true', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email',
        payload: { new_email: newEmail() },
        headers: bearer(s.jwt),
      });
      assert.equal(res.statusCode, 404);
    });
  });

  describe(`AUTH_ENABLED=false [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, AUTH_ENABLED: false });
    });
    after(() => t.close());

    it('answers 404 for every /auth route', async () => {
      for (const [method, url] of [
        ['POST', '/auth/login'],
        ['POST', '/auth/register'],
        ['GET', '/auth/jwks'],
        ['GET', '/auth/token/refresh'],
      ] as const) {
        const res = await t.app.inject({ method, url, payload: method === 'POST' ? {} : undefined });
        assert.equal(res.statusCode, 404, url);
        assert.equal(res.json().code, 'NOT_FOUND');
      }
    });
  });
}
