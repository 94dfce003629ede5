/**
 * GET /auth/sessions and DELETE /auth/sessions/{id}: a person sees where they are signed in (newest first,
 * their own marked) and ends one; ids of other accounts' sessions are never confirmed (404, never 403).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { bearer, HS, login, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

const list = (t: TestApp, jwt: string) =>
  t.app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(jwt) });
const end = (t: TestApp, jwt: string, id: string) =>
  t.app.inject({ method: 'DELETE', url: `/auth/sessions/${encodeURIComponent(id)}`, headers: bearer(jwt) });
const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

for (const kind of dbKinds()) {
  describe(`GET and DELETE /auth/sessions [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, ANONYMOUS_USERS_ENABLED: true });
    });
    after(() => t.close());

    it('lists the sessions newest first, with how and from where each began, the caller’s marked', async () => {
      const first = await signUp(t);
      t.clock.advance(5000);
      const second = (
        await login(
          t,
          { email: first.email, password: first.password, cookie: false },
          { 'user-agent': 'TestPhone/1.0' },
        )
      ).json();
      t.clock.advance(5000);
      const refreshed = await refresh(t, first.refreshToken);
      assert.equal(refreshed.statusCode, 200);

      const res = await list(t, first.jwt);
      assert.equal(res.statusCode, 200, res.body);
      const sessions = res.json() as Record<string, unknown>[];
      assert.equal(sessions.length, 2);
      const [newest, oldest] = sessions as [Record<string, unknown>, Record<string, unknown>];
      assert.deepEqual(Object.keys(newest).sort(), [
        'created_at',
        'current',
        'expires_at',
        'id',
        'ip',
        'last_active_at',
        'sign_in_method',
        'user_agent',
      ]);
      assert.equal(newest.id, decodeJwt(second.jwt_token)['sid']);
      assert.equal(newest.current, false);
      assert.equal(newest.user_agent, 'TestPhone/1.0');
      assert.equal(newest.ip, '127.0.0.1');
      assert.equal(newest.sign_in_method, 'password');
      assert.equal(oldest.id, decodeJwt(first.jwt)['sid']);
      assert.equal(oldest.current, true);
      assert.equal(oldest.sign_in_method, 'password');
      // The refresh moved last_active_at, not created_at.
      assert.ok(Date.parse(oldest.last_active_at as string) > Date.parse(oldest.created_at as string));
      assert.ok(Date.parse(oldest.expires_at as string) > Date.parse(oldest.last_active_at as string));
    });

    it('says anonymous for an anonymous sign-in', async () => {
      const res = await login(t, { anonymous: true, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const sessions = (await list(t, res.json().jwt_token)).json() as { sign_in_method: string }[];
      assert.deepEqual(
        sessions.map((s) => s.sign_in_method),
        ['anonymous'],
      );
    });

    it('ends one session: 204, its refresh token stops working, the list no longer has it', async () => {
      const a = await signUp(t);
      const b = (await login(t, { email: a.email, password: a.password, cookie: false })).json();
      const sid = decodeJwt(b.jwt_token)['sid'] as string;
      assert.equal((await end(t, a.jwt, sid)).statusCode, 204);
      assert.equal((await refresh(t, b.refresh_token)).statusCode, 401);
      const ids = ((await list(t, a.jwt)).json() as { id: string }[]).map((s) => s.id);
      assert.deepEqual(ids, [decodeJwt(a.jwt)['sid']]);
      assert.equal((await end(t, a.jwt, sid)).statusCode, 404, 'an ended session is unknown');
    });

    it("another account's session id answers 404 (never 403) and ends nothing", async () => {
      const mine = await signUp(t);
      const victim = await signUp(t);
      const res = await end(t, mine.jwt, decodeJwt(victim.jwt)['sid'] as string);
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'SESSION_NOT_FOUND');
      assert.equal((await list(t, victim.jwt)).statusCode, 200, "the victim's session is untouched");
      assert.equal((await refresh(t, victim.refreshToken)).statusCode, 200);
    });

    it('unknown and malformed ids answer 404 SESSION_NOT_FOUND', async () => {
      const s = await signUp(t);
      for (const id of ['4b1c2d3e-0000-4000-8000-000000000000', 'not-a-uuid', "1' OR '1'='1", '0']) {
        const res = await end(t, s.jwt, id);
        assert.equal(res.statusCode, 404, id);
        assert.equal(res.json().code, 'SESSION_NOT_FOUND', id);
      }
    });

    it('answers 401 without a credential', async () => {
      assert.equal((await t.app.inject({ method: 'GET', url: '/auth/sessions' })).statusCode, 401);
      const del = await t.app.inject({
        method: 'DELETE',
        url: '/auth/sessions/4b1c2d3e-0000-4000-8000-000000000000',
      });
      assert.equal(del.statusCode, 401);
    });
  });
}
