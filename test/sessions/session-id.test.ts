/**
 * Access tokens name their session (`sid`): "the caller's own session" is the one its token names, never
 * a guess from issue times, so two sign-ins within the same second stay two sessions.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { bearer, HS, login, newEmail, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

for (const kind of dbKinds()) {
  describe(`sessions named by the access token [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    it('an email change from one of two sign-ins made in the same second keeps exactly that one', async () => {
      const first = await signUp(t);
      // The test clock stands still: both sign-ins (and their tokens) have the same issue second.
      const second = (await login(t, { email: first.email, password: first.password, cookie: false })).json();
      assert.equal(decodeJwt(first.jwt).iat, decodeJwt(second.jwt_token).iat);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email',
        payload: { new_email: newEmail('moved') },
        headers: bearer(second.jwt_token),
      });
      assert.equal(res.statusCode, 204, res.body);
      assert.equal(
        (await refresh(t, second.refresh_token)).statusCode,
        200,
        "the caller's own session stays",
      );
      assert.equal((await refresh(t, first.refreshToken)).statusCode, 401, 'the other session ends');
    });

    it('a password change from one of two sign-ins made in the same second keeps exactly that one', async () => {
      const first = await signUp(t);
      const second = (await login(t, { email: first.email, password: first.password, cookie: false })).json();
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password',
        payload: { old_password: first.password, new_password: 'another good password' },
        headers: bearer(first.jwt),
      });
      assert.equal(res.statusCode, 204, res.body);
      assert.equal((await refresh(t, first.refreshToken)).statusCode, 200, "the caller's own session stays");
      assert.equal((await refresh(t, second.refresh_token)).statusCode, 401, 'the other session ends');
    });

    it('names the session in a sid claim that stays the same across refreshes', async () => {
      const s = await signUp(t);
      const sid = decodeJwt(s.jwt)['sid'];
      assert.match(String(sid), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      t.clock.advance(2000);
      const r = await refresh(t, s.refreshToken);
      assert.equal(r.statusCode, 200);
      assert.equal(decodeJwt(r.json().jwt_token)['sid'], sid);
      const other = (await login(t, { email: s.email, password: s.password, cookie: false })).json();
      assert.notEqual(decodeJwt(other.jwt_token)['sid'], sid);
    });
  });
}
