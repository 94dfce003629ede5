import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { captureLog } from '../helpers/log.ts';
import { bearer, count, HS, HS_KEY, login, newEmail, setCookies, signUp } from './helpers.ts';

const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

for (const kind of dbKinds()) {
  describe(`access tokens [${kind}]`, () => {
    let t: TestApp;
    const capture = captureLog('debug');
    before(async () => {
      t = await buildTestApp(
        kind,
        {
          ...HS,
          JWT_CUSTOM_FIELDS: ['display_name', 'avatar_url'],
          RATE_LIMIT_ENABLED: false,
        },
        { log: capture.log },
      );
    });
    after(() => t.close());

    it('signs HS256 tokens with the exact Hasura claims and jwt_expires_in in milliseconds', async () => {
      const email = newEmail();
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email, password: 'a fine password', cookie: false },
      });
      const body = res.json();
      assert.equal(body.jwt_expires_in, 15 * 60 * 1000);
      const { payload, protectedHeader } = await jwtVerify(body.jwt_token, new TextEncoder().encode(HS_KEY), {
        algorithms: ['HS256'],
        currentDate: t.clock.now(),
      });
      assert.deepEqual(protectedHeader, { alg: 'HS256' });
      assert.deepEqual(Object.keys(payload), [
        'https://hasura.io/jwt/claims',
        'auth_time',
        'sid',
        'sub',
        'iss',
        'iat',
        'exp',
      ]);
      // OIDC's auth_time: the sign-in (here the registration) that started the session.
      assert.equal(payload.auth_time, payload.iat);
      // OIDC's sid: the session, which GET /auth/sessions lists and DELETE /auth/sessions/{id} ends.
      assert.match(String(payload.sid), /^[0-9a-f-]{36}$/);
      assert.deepEqual(payload['https://hasura.io/jwt/claims'], {
        'x-hasura-user-id': body.user.id,
        'x-hasura-allowed-roles': ['user'],
        'x-hasura-default-role': 'user',
        'x-hasura-display-name': email,
        'x-hasura-avatar-url': 'null',
      });
      assert.equal(payload.sub, body.user.id);
      assert.equal(payload.iss, 'nhost');
      assert.equal((payload.exp as number) - (payload.iat as number), 900);
    });

    it('answers GET /auth/jwks with 501 for an HS key', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/auth/jwks' });
      assert.equal(res.statusCode, 501);
      assert.equal(res.json().message, 'JWKS is not implemented on this server.');
    });

    // The fuzzer counted every such answer as a server failure, as an operator's alerting would.
    it('logs the 501 of GET /auth/jwks (explained by the HS key) at info, without a stack, never as an error', async () => {
      const earlier = capture.matching(/JWKS is not implemented/).length;
      for (let i = 0; i < 3; i++)
        assert.equal((await t.app.inject({ method: 'GET', url: '/auth/jwks' })).statusCode, 501);
      const lines = capture.matching(/JWKS is not implemented/);
      assert.equal(lines.length, earlier + 3);
      for (const line of lines) {
        assert.equal(line['level'], 30, 'info');
        assert.equal(line['errorCode'], 'JWKS_NOT_AVAILABLE');
        assert.doesNotMatch(JSON.stringify(line), /"stack"|at .*\.ts:\d+/);
      }
      assert.deepEqual(
        capture.lines.filter((l) => (l['level'] as number) >= 50),
        [],
        'no error-level line',
      );
    });
  });

  describe(`RS256 tokens and JWKS [${kind}]`, () => {
    let t: TestApp;
    let base: string;
    before(async () => {
      t = await buildTestApp(kind, { JWT_ALGORITHM: 'RS256', RATE_LIMIT_ENABLED: false });
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    });
    after(() => t.close());

    it('publishes the public key, and tokens verify through /auth/jwks over HTTP', async () => {
      const s = await signUp(t);
      const jwks = createRemoteJWKSet(new URL(`${base}/auth/jwks`));
      const { payload } = await jwtVerify(s.jwt, jwks, { algorithms: ['RS256'], currentDate: t.clock.now() });
      assert.equal(payload.sub, s.userId);
      const header = decodeProtectedHeader(s.jwt);
      assert.equal(header.kid, t.ctx.keys.kid);
      const res = await fetch(`${base}/auth/jwks`);
      const { keys } = (await res.json()) as { keys: Record<string, string>[] };
      assert.equal(keys.length, 1);
      assert.equal(keys[0]?.kty, 'RSA');
      assert.equal(keys[0]?.alg, 'RS256');
      assert.equal(keys[0]?.d, undefined, 'no private member');
    });
  });

  describe(`refresh tokens [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, REFRESH_TOKEN_REUSE_INTERVAL: 10 });
    });
    after(() => t.close());

    it('stores refresh tokens only as SHA-256 digests', async () => {
      const s = await signUp(t);
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.session_tokens WHERE token_hash = $1', [
          s.refreshToken,
        ]),
        0,
      );
      assert.ok(s.refreshToken.length >= 43);
    });

    it('rotates on refresh: a new token in the body, the JWT rebuilt from the account', async () => {
      const s = await signUp(t);
      const res = await refresh(t, s.refreshToken);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.notEqual(body.refresh_token, s.refreshToken);
      assert.equal(body.user.id, s.userId);
      assert.equal(res.headers['set-cookie'], undefined, 'query refresh leaves cookies alone');
      assert.equal((await refresh(t, body.refresh_token)).statusCode, 200);
    });

    it('gives a sibling when a rotated token comes back within the reuse interval', async () => {
      const s = await signUp(t);
      const first = await refresh(t, s.refreshToken);
      t.clock.advance(5_000);
      const again = await refresh(t, s.refreshToken);
      assert.equal(again.statusCode, 200, again.body);
      assert.notEqual(again.json().refresh_token, first.json().refresh_token);
      assert.equal((await refresh(t, first.json().refresh_token)).statusCode, 200);
    });

    it('revokes the whole family when a rotated token comes back after the reuse interval', async () => {
      const s = await signUp(t);
      const first = await refresh(t, s.refreshToken);
      const newest = await refresh(t, first.json().refresh_token);
      const other = await login(t, { email: s.email, password: s.password, cookie: false });
      t.clock.advance(11_000);
      const replay = await refresh(t, s.refreshToken);
      assert.equal(replay.statusCode, 401);
      assert.equal(replay.json().message, 'Invalid or expired refresh token.');
      assert.equal((await refresh(t, newest.json().refresh_token)).statusCode, 401, 'family revoked');
      assert.equal((await refresh(t, other.json().refresh_token)).statusCode, 200, 'other sign-ins survive');
    });

    it('lets two racing refreshes of one token both succeed', async () => {
      const s = await signUp(t);
      const [a, b] = await Promise.all([refresh(t, s.refreshToken), refresh(t, s.refreshToken)]);
      assert.equal(a.statusCode, 200, a.body);
      assert.equal(b.statusCode, 200, b.body);
    });

    it('rotates a raced token once: one successor replaces it, the other is a sibling under the grace', async () => {
      const s = await signUp(t);
      const [a, b] = await Promise.all([refresh(t, s.refreshToken), refresh(t, s.refreshToken)]);
      assert.equal(a.statusCode, 200, a.body);
      assert.equal(b.statusCode, 200, b.body);
      const family = `SELECT count(*)::int AS n FROM auth.session_tokens st JOIN auth.accounts a ON a.id = st.account_id
                       WHERE a.user_id = $1`;
      assert.equal(await count(t, family, [s.userId]), 3, 'the presented token and its two successors');
      assert.equal(await count(t, `${family} AND st.rotated_at IS NOT NULL`, [s.userId]), 1, 'rotated once');
    });

    it("drops the account's expired tokens when it rotates one", async () => {
      const s = await signUp(t);
      t.clock.advance(43200 * 60_000 - 1000);
      const fresh = await login(t, { email: s.email, password: s.password, cookie: false });
      t.clock.advance(2000);
      const tokens = `SELECT count(*)::int AS n FROM auth.session_tokens st JOIN auth.accounts a ON a.id = st.account_id
                       WHERE a.user_id = $1`;
      assert.equal(await count(t, tokens, [s.userId]), 2, 'the expired sign-up token is still stored');
      const res = await refresh(t, fresh.json().refresh_token);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(await count(t, tokens, [s.userId]), 2, 'the rotated token and its successor only');
      assert.equal(
        await count(t, `${tokens} AND st.expires_at <= $2`, [s.userId, t.clock.now()]),
        0,
        'no expired token left',
      );
    });

    it('expires refresh tokens after exactly JWT_REFRESH_EXPIRES_IN minutes', async () => {
      const s = await signUp(t);
      t.clock.advance(43200 * 60_000 - 1000);
      const ok = await refresh(t, s.refreshToken);
      assert.equal(ok.statusCode, 200);
      const later = ok.json().refresh_token;
      const s2 = await signUp(t);
      t.clock.advance(43200 * 60_000 + 1);
      assert.equal((await refresh(t, s2.refreshToken)).statusCode, 401);
      assert.equal((await refresh(t, later)).statusCode, 401);
    });

    it('answers 401 to a missing, unknown or garbage refresh token', async () => {
      for (const url of [
        '/auth/token/refresh',
        '/auth/token/refresh?refresh_token=',
        '/auth/token/refresh?refresh_token=nope',
        '/auth/token/refresh?refresh_token=00000000-0000-4000-8000-000000000000',
      ]) {
        const res = await t.app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 401, url);
        assert.equal(res.json().message, 'Invalid or expired refresh token.');
      }
    });

    it('refuses refresh for an account that was deactivated', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET active = false WHERE user_id = $1', [s.userId]);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
    });

    it('keeps an upgraded HBP refresh token (migrated as the hash of its uuid) working', async () => {
      const s = await signUp(t);
      const legacy = '3f2b1c9e-8f6d-4a1b-9c7e-2d5f8a1b3c4d';
      await t.ctx.db.query(
        't',
        `WITH session AS (
           INSERT INTO auth.sessions (id, account_id, created_at, last_active_at, expires_at)
           SELECT gen_random_uuid(), id, now(), now(), $3::timestamptz FROM auth.accounts WHERE user_id = $2
           RETURNING id, account_id
         )
         INSERT INTO auth.session_tokens (token_hash, family_id, account_id, expires_at)
         SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex'), id, account_id, $3::timestamptz FROM session`,
        [legacy, s.userId, new Date(t.clock.now().getTime() + 86_400_000)],
      );
      const res = await refresh(t, legacy);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().user.id, s.userId);
    });
  });

  describe(`cookies [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    it('sets signed refresh and permission cookies and omits refresh_token from the body when cookie is true', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email, password: s.password });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().refresh_token, undefined);
      const jar = setCookies(res);
      assert.ok(jar.refresh_token?.value.includes('.'), 'signed');
      assert.equal(jar.refresh_token?.maxAge, 43200 * 60);
      assert.ok((jar.permission_variables?.maxAge ?? Infinity) <= 15 * 60, 'no longer than the access token');
      const raw = res.headers['set-cookie'] as string[];
      assert.ok(raw.every((c) => /HttpOnly/.test(c) && /SameSite=Lax/.test(c) && /Path=\//.test(c)));
    });

    it('clears both cookies and returns refresh_token when cookie is false', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email, password: s.password, cookie: false });
      assert.equal(typeof res.json().refresh_token, 'string');
      const jar = setCookies(res);
      assert.equal(jar.refresh_token?.value, '');
      assert.equal(jar.permission_variables?.value, '');
    });

    it('refreshes from the cookie and answers with new cookies, not a body token', async () => {
      const s = await signUp(t);
      const signIn = setCookies(await login(t, { email: s.email, password: s.password }));
      const res = await t.app.inject({
        method: 'GET',
        url: '/auth/token/refresh',
        cookies: { refresh_token: signIn.refresh_token?.value as string },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().refresh_token, undefined);
      const jar = setCookies(res);
      assert.ok(jar.refresh_token?.value && jar.refresh_token.value !== signIn.refresh_token?.value);
    });

    it('authenticates with the permission_variables cookie, and ignores a forged one', async () => {
      const s = await signUp(t);
      const jar = setCookies(await login(t, { email: s.email, password: s.password }));
      const ok = await t.app.inject({
        method: 'POST',
        url: '/auth/token/revoke',
        // A browser on the service's own pages sends its origin with every POST.
        headers: { origin: t.config.SERVER_URL },
        cookies: { permission_variables: jar.permission_variables?.value as string },
      });
      assert.equal(ok.statusCode, 204);
      const forged = await t.app.inject({
        method: 'POST',
        url: '/auth/token/revoke',
        headers: { origin: t.config.SERVER_URL },
        cookies: { permission_variables: s.jwt },
      });
      assert.equal(forged.statusCode, 401, 'an unsigned cookie is not an identity');
    });

    it('uses the query token over the refresh cookie, and leaves a cookie of another sign-in as it was', async () => {
      const s = await signUp(t);
      const jar = setCookies(await login(t, { email: s.email, password: s.password }));
      const cookie = jar.refresh_token?.value as string;
      const res = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${s.refreshToken}`,
        cookies: { refresh_token: cookie },
      });
      assert.equal(res.statusCode, 200, res.body);
      const rotated = res.json().refresh_token;
      assert.ok(
        rotated && rotated !== s.refreshToken,
        'the query token was rotated, its successor in the body',
      );
      assert.equal(res.headers['set-cookie'], undefined, "the cookie's sign-in was not touched");
      // Long after the reuse interval, both sign-ins still refresh: neither was taken for the other.
      t.clock.advance(60_000);
      for (const [url, cookies] of [
        ['/auth/token/refresh', { refresh_token: cookie }],
        [`/auth/token/refresh?refresh_token=${rotated}`, {}],
      ] as const) {
        const later = await t.app.inject({ method: 'GET', url, cookies });
        assert.equal(later.statusCode, 200, later.body);
      }
    });

    it("renews the cookie too when the query names the cookie's own token, so the cookie never goes stale", async () => {
      const s = await signUp(t);
      const signIn = await login(t, { email: s.email, password: s.password, cookie: false });
      const token = signIn.json().refresh_token as string;
      const signed = t.app.signCookie(token);
      const res = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${token}`,
        cookies: { refresh_token: signed },
      });
      assert.equal(res.statusCode, 200, res.body);
      const inBody = res.json().refresh_token;
      const renewed = setCookies(res).refresh_token?.value;
      assert.ok(renewed, 'a new refresh cookie is set');
      assert.equal(
        t.app.unsignCookie(renewed).value,
        inBody,
        'the cookie holds the same successor as the body',
      );
      t.clock.advance(60_000);
      const later = await t.app.inject({
        method: 'GET',
        url: '/auth/token/refresh',
        cookies: { refresh_token: renewed },
      });
      assert.equal(later.statusCode, 200, later.body);
    });

    it('ignores a refresh cookie with a bad signature and uses the query token', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${s.refreshToken}`,
        cookies: { refresh_token: 'tampered.value' },
      });
      assert.equal(res.statusCode, 200);
    });
  });

  describe(`logout and revoke [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    it('ends one sign-in on logout and keeps the others', async () => {
      const s = await signUp(t);
      const other = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await t.app.inject({ method: 'POST', url: `/auth/logout?refresh_token=${s.refreshToken}` });
      assert.equal(res.statusCode, 204);
      assert.equal(res.body, '');
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
      assert.equal((await refresh(t, other.refresh_token)).statusCode, 200);
    });

    it('ends every session with all: true', async () => {
      const s = await signUp(t);
      const other = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await t.app.inject({
        method: 'POST',
        url: `/auth/logout?refresh_token=${s.refreshToken}`,
        payload: { all: true },
      });
      assert.equal(res.statusCode, 204);
      assert.equal((await refresh(t, other.refresh_token)).statusCode, 401);
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.session_tokens s JOIN auth.accounts a ON a.id = s.account_id WHERE a.user_id = $1',
          [s.userId],
        ),
        0,
      );
    });

    it('logs out with the refresh cookie and clears both cookies', async () => {
      const s = await signUp(t);
      const jar = setCookies(await login(t, { email: s.email, password: s.password }));
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/logout',
        headers: { origin: t.config.SERVER_URL },
        cookies: { refresh_token: jar.refresh_token?.value as string },
      });
      assert.equal(res.statusCode, 204);
      const cleared = setCookies(res);
      assert.equal(cleared.refresh_token?.value, '');
      assert.equal(cleared.permission_variables?.value, '');
    });

    it('leaves cookies alone when logging out with a query token', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: `/auth/logout?refresh_token=${s.refreshToken}` });
      assert.equal(res.statusCode, 204);
      assert.equal(res.headers['set-cookie'], undefined);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401, 'the sign-in ended');
    });

    it('answers logout without a refresh token with 401', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/auth/logout' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().message, 'Invalid or expired refresh token.');
    });

    it('revokes every session of the signed-in user on /auth/token/revoke', async () => {
      const s = await signUp(t);
      const other = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await t.app.inject({ method: 'POST', url: '/auth/token/revoke', headers: bearer(s.jwt) });
      assert.equal(res.statusCode, 204);
      assert.equal((await refresh(t, s.refreshToken)).statusCode, 401);
      assert.equal((await refresh(t, other.refresh_token)).statusCode, 401);
    });

    it('answers /auth/token/revoke without a token with 401 Not logged in', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/auth/token/revoke' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().message, 'Not logged in');
    });
  });
}
