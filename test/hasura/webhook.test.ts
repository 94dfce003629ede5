/**
 * GET /auth/hasura, Hasura's auth webhook in GET mode: the engine forwards the client's headers and reads
 * 200 with session variables (strings) or 401 to deny. A revoked session is denied at once, which a
 * GraphQL engine verifying JWTs by itself cannot do.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { bearer, HS, login, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

const hook = (t: TestApp, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'GET', url: '/auth/hasura', headers });

for (const kind of dbKinds()) {
  describe(`GET /auth/hasura [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        JWT_CUSTOM_FIELDS: ['display_name'],
        ALLOWED_USER_ROLES: ['user', 'editor'],
        JWT_EXPIRES_IN: 15,
      });
      await t.ctx.db.query('t', "INSERT INTO auth.roles (role) VALUES ('editor') ON CONFLICT DO NOTHING");
    });
    after(() => t.close());

    it("answers the token's session variables as strings, with the default role", async () => {
      const s = await signUp(t);
      const res = await hook(t, bearer(s.jwt));
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.equal(body['X-Hasura-User-Id'], s.userId);
      assert.equal(body['X-Hasura-Role'], 'user');
      assert.equal(body['X-Hasura-Default-Role'], 'user');
      assert.equal(body['X-Hasura-Display-Name'], s.email);
      for (const v of Object.values(body)) assert.equal(typeof v, 'string');
      assert.match(String(res.headers['cache-control']), /no-store/, 'never cached: revocation is live');
    });

    it('uses the x-hasura-role header when the token allows that role', async () => {
      const s = await signUp(t);
      await t.ctx.db.query(
        't',
        `INSERT INTO auth.account_roles (account_id, role) SELECT id, 'editor' FROM auth.accounts WHERE user_id = $1`,
        [s.userId],
      );
      const fresh = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      const res = await hook(t, { ...bearer(fresh.jwt_token), 'x-hasura-role': 'editor' });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json()['X-Hasura-Role'], 'editor');
    });

    it('denies (401) a role the token does not allow', async () => {
      const s = await signUp(t);
      const res = await hook(t, { ...bearer(s.jwt), 'x-hasura-role': 'admin' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'ROLE_NOT_ALLOWED');
    });

    it('denies (401) the access token of a session that has ended, at once', async () => {
      const s = await signUp(t);
      assert.equal((await hook(t, bearer(s.jwt))).statusCode, 200);
      const out = await t.app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(s.jwt) });
      assert.equal(out.statusCode, 204);
      assert.equal((await hook(t, bearer(s.jwt))).statusCode, 401);
    });

    it('denies (401) an expired token', async () => {
      const s = await signUp(t);
      t.clock.advance(16 * 60_000);
      try {
        assert.equal((await hook(t, bearer(s.jwt))).statusCode, 401);
      } finally {
        t.clock.advance(-16 * 60_000);
      }
    });

    it('denies (401) a forged token', async () => {
      const s = await signUp(t);
      const forged = await new SignJWT({
        'https://hasura.io/jwt/claims': {
          'x-hasura-user-id': s.userId,
          'x-hasura-allowed-roles': ['admin'],
          'x-hasura-default-role': 'admin',
        },
      })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode('another-secret-key-of-at-least-32-bytes'));
      assert.equal((await hook(t, bearer(forged))).statusCode, 401);
    });

    it('denies (401) a request without a token when no anonymous role is set', async () => {
      const res = await hook(t);
      assert.equal(res.statusCode, 401);
    });
  });

  describe(`GET /auth/hasura with HASURA_WEBHOOK_ANONYMOUS_ROLE [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, HASURA_WEBHOOK_ANONYMOUS_ROLE: 'public' });
    });
    after(() => t.close());

    it('answers the anonymous role for a request without a token', async () => {
      const res = await hook(t);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { 'X-Hasura-Role': 'public' });
    });

    it('still denies a bad token (a bad credential is not "no credential")', async () => {
      assert.equal((await hook(t, { authorization: 'Bearer a.b.c' })).statusCode, 401);
    });
  });
}
