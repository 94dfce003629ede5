/**
 * Revocation at once: when a session ends, by any path, every access token of it is refused (401) on a
 * signed-in auth route and on a storage route within one second, while the account's other sessions (or,
 * when every session of the account ends, another account's) keep working. Before, an access token stayed
 * valid until its expiry (15 minutes) after logout, a password reset, a ban or a deletion.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { disableUser, findAccount, resetLink, signOutUser } from '../../src/auth/operator.ts';
import { authDeps } from '../../src/context.ts';
import { bearer, HS, login, newEmail, type Signed, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { authenticatorCode } from '../mfa/helpers.ts';

/** Statuses of a signed-in auth route and a storage route for `jwt`. */
async function statuses(t: TestApp, jwt: string, userId: string): Promise<[number, number]> {
  const auth = await t.app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(jwt) });
  const storage = await t.app.inject({
    method: 'GET',
    url: `/storage/m/user/${userId}/nothing-here.txt`,
    headers: bearer(jwt),
  });
  return [auth.statusCode, storage.statusCode];
}

/** Waits (at most one second) until both routes refuse `jwt` with 401; fails otherwise. */
export async function refusedWithinOneSecond(t: TestApp, jwt: string, userId: string): Promise<void> {
  const deadline = Date.now() + 1000;
  let last: [number, number] = [0, 0];
  for (;;) {
    last = await statuses(t, jwt, userId);
    if (last[0] === 401 && last[1] === 401) return;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(
    `the access token of the ended session is still accepted after 1 s: auth ${last[0]}, storage ${last[1]}`,
  );
}

async function stillWorks(t: TestApp, jwt: string, userId: string): Promise<void> {
  const [auth, storage] = await statuses(t, jwt, userId);
  assert.equal(auth, 200, 'the other session still reads its sessions');
  assert.notEqual(storage, 401, 'the other session still reaches storage');
}

const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

for (const kind of dbKinds()) {
  describe(`an ended session's access tokens are refused at once [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        ALLOW_USER_SELF_DELETE: true,
        LOST_PASSWORD_ENABLED: true,
        REFRESH_TOKEN_REUSE_INTERVAL: 0,
      });
    });
    after(() => t.close());

    /** An account signed in twice: `a` is the session to end, `b` another of the same account. */
    async function twoSessions(): Promise<{ a: Signed; b: { jwt: string; refreshToken: string } }> {
      const a = await signUp(t);
      const r = (await login(t, { email: a.email, password: a.password, cookie: false })).json();
      return { a, b: { jwt: r.jwt_token, refreshToken: r.refresh_token } };
    }

    it('a stolen access token stops working at logout (refresh token in the query)', async () => {
      const { a, b } = await twoSessions();
      const res = await t.app.inject({
        method: 'POST',
        url: `/auth/logout?refresh_token=${encodeURIComponent(a.refreshToken)}`,
      });
      assert.equal(res.statusCode, 204);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await stillWorks(t, b.jwt, a.userId);
    });

    it('a stolen access token stops working at a bearer-only logout', async () => {
      const { a, b } = await twoSessions();
      const res = await t.app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(a.jwt) });
      assert.equal(res.statusCode, 204);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      assert.equal((await refresh(t, a.refreshToken)).statusCode, 401, 'its refresh token ends too');
      await stillWorks(t, b.jwt, a.userId);
    });

    it('a lost device signed out with DELETE /auth/sessions/{id} can use its access token no more', async () => {
      const { a, b } = await twoSessions();
      const sid = decodeJwt(a.jwt)['sid'] as string;
      const res = await t.app.inject({
        method: 'DELETE',
        url: `/auth/sessions/${sid}`,
        headers: bearer(b.jwt),
      });
      assert.equal(res.statusCode, 204);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      assert.equal((await refresh(t, a.refreshToken)).statusCode, 401);
      await stillWorks(t, b.jwt, a.userId);
    });

    it('logout with all: true refuses the access tokens of every session of the account', async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      const res = await t.app.inject({
        method: 'POST',
        url: `/auth/logout?refresh_token=${encodeURIComponent(b.refreshToken)}`,
        payload: { all: true },
      });
      assert.equal(res.statusCode, 204);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it('POST /auth/token/revoke refuses the access tokens of every session of the account', async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: '/auth/token/revoke', headers: bearer(b.jwt) });
      assert.equal(res.statusCode, 204);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it("a password change ends the thief's session at once and keeps the caller's", async () => {
      const { a, b } = await twoSessions();
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password',
        payload: { old_password: a.password, new_password: 'a brand new password' },
        headers: bearer(b.jwt),
      });
      assert.equal(res.statusCode, 204, res.body);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await stillWorks(t, b.jwt, a.userId);
    });

    it("an email change ends the thief's session at once and keeps the caller's", async () => {
      const { a, b } = await twoSessions();
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email',
        payload: { new_email: newEmail('moved') },
        headers: bearer(b.jwt),
      });
      assert.equal(res.statusCode, 204, res.body);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await stillWorks(t, b.jwt, a.userId);
    });

    it("turning MFA off ends the other sessions at once and keeps the caller's", async () => {
      const { a, b } = await twoSessions();
      const post = (url: string, payload: Record<string, unknown>) =>
        t.app.inject({ method: 'POST', url, payload, headers: bearer(b.jwt) });
      const gen = await post('/auth/mfa/generate', {});
      assert.equal(gen.statusCode, 200, gen.body);
      const secret = gen.json().otp_secret as string;
      const now = () => t.clock.now().getTime();
      assert.equal(
        (await post('/auth/mfa/enable', { code: authenticatorCode(secret, now()) })).statusCode,
        204,
      );
      t.clock.advance(30_000);
      const off = await post('/auth/mfa/disable', { code: authenticatorCode(secret, now()) });
      assert.equal(off.statusCode, 204, off.body);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await stillWorks(t, b.jwt, a.userId);
    });

    it('a password reset refuses the access tokens of every session of the account', async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      const account = await findAccount(t.ctx.db, a.email);
      const { link } = await resetLink(authDeps(t.ctx), account);
      const ticket = new URL(link).searchParams.get('ticket');
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/change',
        payload: { ticket, new_password: 'a brand new password' },
      });
      assert.equal(res.statusCode, 204, res.body);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it('a replayed refresh token ends its session, access tokens included, and leaves the others', async () => {
      const { a, b } = await twoSessions();
      const rotated = await refresh(t, a.refreshToken);
      assert.equal(rotated.statusCode, 200);
      const stolenJwt = rotated.json().jwt_token as string;
      t.clock.advance(1000);
      assert.equal((await refresh(t, a.refreshToken)).statusCode, 401, 'reuse detected');
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, stolenJwt, a.userId);
      await stillWorks(t, b.jwt, a.userId);
    });

    it('a disabled account has its access tokens refused at once', async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      // As `gatehouse users disable` runs it: a process with no revoked list of its own.
      const cli = { config: t.config, db: t.ctx.db, clock: t.clock };
      await disableUser(cli, await findAccount(t.ctx.db, a.email));
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it('gatehouse users sign-out refuses the access tokens of every session of the account', async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      const cli = { config: t.config, db: t.ctx.db, clock: t.clock };
      assert.equal(await signOutUser(cli, await findAccount(t.ctx.db, a.email)), 2);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it("a deleted account's access tokens are refused at once", async () => {
      const { a, b } = await twoSessions();
      const other = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: '/auth/delete', headers: bearer(b.jwt) });
      assert.equal(res.statusCode, 204, res.body);
      await refusedWithinOneSecond(t, a.jwt, a.userId);
      await refusedWithinOneSecond(t, b.jwt, a.userId);
      await stillWorks(t, other.jwt, other.userId);
    });

    it('a heartbeat heard back keeps the list trusted (the connection is alive)', async () => {
      const revocations = t.ctx.revocations;
      assert.equal(revocations.stats().trusted, true);
      revocations.heartbeat();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(revocations.stats().trusted, true);
      // Heard back: the next heartbeat may go (a pending one would make this a no-op until its timeout).
      revocations.heartbeat();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(revocations.stats().trusted, true);
    });

    it('a new instance (a restart) refuses what was revoked before it started', async () => {
      const { a, b } = await twoSessions();
      const sid = decodeJwt(a.jwt)['sid'] as string;
      await t.app.inject({ method: 'DELETE', url: `/auth/sessions/${sid}`, headers: bearer(b.jwt) });
      const { Revocations } = await import('../../src/auth/revocations.ts');
      const fresh = new Revocations(t.ctx.db, t.clock, (await import('pino')).default({ level: 'silent' }));
      await fresh.start();
      try {
        const facts = { userId: a.userId, sessionId: sid, issuedAt: decodeJwt(a.jwt).iat as number };
        assert.equal(fresh.refuses(facts), true);
        const kept = { userId: a.userId, sessionId: decodeJwt(b.jwt)['sid'] as string, issuedAt: 0 };
        assert.equal(fresh.refuses(kept), false);
      } finally {
        await fresh.stop();
      }
    });
  });
}
