/**
 * Every action the issue lists leaves its event in the owner's security feed, over HTTP, in the
 * transaction of the change: sign-ins (each method), wrong passwords and codes (at most one a minute),
 * sessions ended, password change and reset, email change, MFA on and off, the account disabled. No event
 * holds a secret (password, token, ticket, code, TOTP secret), and no feed shows another account's events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { disableUser, findAccount } from '../../src/auth/operator.ts';
import { authDeps } from '../../src/context.ts';
import { bearer, login, signUp } from '../auth/helpers.ts';
import { dbKinds } from '../helpers/db.ts';
import { buildMailApp, type MailTestApp } from '../mail/fixtures.ts';
import { authenticatorCode, wrongCode } from '../mfa/helpers.ts';
import { accountIdOf, type FeedEvent, feed } from './helpers.ts';

for (const kind of dbKinds()) {
  describe(`the security feed after each action [${kind}]`, () => {
    let t: MailTestApp;
    const secrets: string[] = [];
    before(async () => {
      t = await buildMailApp(kind, { LOST_PASSWORD_ENABLED: true, MAGIC_LINK_ENABLED: true });
    });
    after(() => t.close());

    const events = async (jwt: string, type?: string) => {
      const res = await feed(t, jwt, '?limit=100');
      assert.equal(res.statusCode, 200, res.body);
      const all = res.json() as FeedEvent[];
      return type === undefined ? all : all.filter((e) => e.type === type);
    };
    const post = (url: string, payload: Record<string, unknown>, jwt?: string) =>
      t.app.inject({ method: 'POST', url, payload, headers: jwt ? bearer(jwt) : {} });
    const signInAgain = async (email: string, password: string, ua = 'FeedTest/1.0') => {
      const res = await login(t, { email, password, cookie: false }, { 'user-agent': ua });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { jwt_token: string; refresh_token: string };
      secrets.push(body.jwt_token, body.refresh_token);
      return body;
    };

    it('records sign-ins, one wrong password a minute, ended sessions, password and email changes', async () => {
      const a = await signUp(t);
      secrets.push(a.password, a.jwt, a.refreshToken);
      // Three wrong passwords within a minute: one event, so a flood cannot bury the rest.
      for (let i = 0; i < 3; i++) {
        const wrong = `wrong password ${i}!`;
        secrets.push(wrong);
        assert.equal((await login(t, { email: a.email, password: wrong })).statusCode, 401);
      }
      assert.equal((await events(a.jwt, 'sign_in_failed')).length, 1);
      t.clock.advance(61_000);
      assert.equal((await login(t, { email: a.email, password: 'wrong again!!' })).statusCode, 401);
      const failed = await events(a.jwt, 'sign_in_failed');
      assert.equal(failed.length, 2);
      assert.deepEqual(failed[0]?.details, { reason: 'password' });

      const second = await signInAgain(a.email, a.password);
      const secondSid = decodeJwt(second.jwt_token).sid as string;
      const signIns = await events(a.jwt, 'sign_in');
      assert.equal(signIns.length, 2);
      assert.deepEqual(signIns[0]?.details, { method: 'password' });
      assert.equal(signIns[0]?.session_id, secondSid);
      assert.equal(signIns[0]?.user_agent, 'FeedTest/1.0');

      // The owner ends the second session from the first.
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/auth/sessions/${secondSid}`,
        headers: bearer(a.jwt),
      });
      assert.equal(del.statusCode, 204);
      const [ended] = await events(a.jwt, 'session_ended');
      assert.deepEqual(ended?.details, { reason: 'ended_by_owner', sessions: [secondSid] });
      assert.equal(ended?.session_id, decodeJwt(a.jwt).sid);

      // Logout of a third session by its refresh token.
      const third = await signInAgain(a.email, a.password);
      const thirdSid = decodeJwt(third.jwt_token).sid as string;
      assert.equal((await post(`/auth/logout?refresh_token=${third.refresh_token}`, {})).statusCode, 204);
      const [loggedOut] = await events(a.jwt, 'session_ended');
      assert.deepEqual(loggedOut?.details, { reason: 'logout', sessions: [thirdSid] });
      assert.equal(loggedOut?.session_id, thirdSid);

      // A password change ends the others (a fourth) and keeps the caller's.
      const fourth = await signInAgain(a.email, a.password);
      const newPassword = 'a brand new password';
      secrets.push(newPassword);
      const changed = await post(
        '/auth/change-password',
        { old_password: a.password, new_password: newPassword },
        a.jwt,
      );
      assert.equal(changed.statusCode, 204, changed.body);
      const [pw] = await events(a.jwt, 'password_changed');
      assert.equal(pw?.session_id, decodeJwt(a.jwt).sid);
      assert.deepEqual(pw?.details, {});
      const [byChange] = await events(a.jwt, 'session_ended');
      assert.deepEqual(byChange?.details, {
        reason: 'password_changed',
        sessions: [decodeJwt(fourth.jwt_token).sid],
      });

      // An email change (VERIFY_EMAILS off: at once); a fresh sign-in proves it is the owner.
      const fresh = await signInAgain(a.email, newPassword);
      const moved = `moved-${Date.now()}@example.com`;
      const emailRes = await post('/auth/change-email', { new_email: moved }, fresh.jwt_token);
      assert.equal(emailRes.statusCode, 204, emailRes.body);
      const [em] = await events(fresh.jwt_token, 'email_changed');
      assert.deepEqual(em?.details, { confirmed: false });
      assert.equal(em?.session_id, decodeJwt(fresh.jwt_token).sid);
      const [byEmail] = await events(fresh.jwt_token, 'session_ended');
      assert.equal(byEmail?.details.reason, 'email_changed');
      assert.deepEqual(byEmail?.details.sessions, [decodeJwt(a.jwt).sid]);

      // A password reset by the emailed ticket ends every session.
      assert.equal((await post('/auth/change-password/request', { email: moved })).statusCode, 204);
      const ticket = t.smtp.last(moved).headers.get('x-ticket') as string;
      secrets.push(ticket);
      const resetPassword = 'the reset password';
      secrets.push(resetPassword);
      const reset = await post('/auth/change-password/change', { ticket, new_password: resetPassword });
      assert.equal(reset.statusCode, 204, reset.body);
      const after = await signInAgain(moved, resetPassword);
      const [rs] = await events(after.jwt_token, 'password_reset');
      assert.deepEqual(rs?.details, {});
      assert.equal(rs?.ip, '127.0.0.1');
      const [byReset] = await events(after.jwt_token, 'session_ended');
      assert.equal(byReset?.details.reason, 'password_reset');

      // Sign out everywhere.
      assert.equal((await post('/auth/token/revoke', {}, after.jwt_token)).statusCode, 204);
      const last = await signInAgain(moved, resetPassword);
      const [everywhere] = await events(last.jwt_token, 'session_ended');
      assert.deepEqual(everywhere?.details, {
        reason: 'sign_out_everywhere',
        sessions: [decodeJwt(after.jwt_token).sid],
      });
    });

    it('records a magic-link sign-in with its method', async () => {
      const a = await signUp(t);
      assert.equal((await post('/auth/login', { email: a.email })).statusCode, 200);
      const link = /https?:\/\/\S+magic-link\S*/.exec(t.smtp.last(a.email).text)?.[0];
      assert.ok(link);
      const url = new URL(link);
      secrets.push(url.searchParams.get('token') ?? 'no token');
      const res = await t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}&cookie=false` });
      assert.ok(res.statusCode === 200 || res.statusCode === 302, res.body);
      // The link is the address's first proof: the sessions made before it end (a.jwt's too), so the
      // feed is read with the session the link began.
      let jwt: string;
      if (res.statusCode === 302) {
        const refreshToken = new URL(String(res.headers.location)).searchParams.get('refresh_token');
        assert.ok(refreshToken);
        secrets.push(refreshToken);
        const refreshed = await t.app.inject({
          method: 'GET',
          url: `/auth/token/refresh?refresh_token=${encodeURIComponent(refreshToken)}`,
        });
        assert.equal(refreshed.statusCode, 200, refreshed.body);
        jwt = refreshed.json().jwt_token as string;
      } else jwt = res.json().jwt_token as string;
      const [signIn] = await events(jwt, 'sign_in');
      assert.deepEqual(signIn?.details, { method: 'magic-link' });
      const [ended] = await events(jwt, 'session_ended');
      assert.deepEqual(ended?.details, { reason: 'address_proven', sessions: [decodeJwt(a.jwt).sid] });
    });

    it('records MFA on, a wrong code at sign-in, the MFA sign-in and MFA off', async () => {
      const a = await signUp(t);
      const gen = await post('/auth/mfa/generate', {}, a.jwt);
      assert.equal(gen.statusCode, 200, gen.body);
      const otpSecret = gen.json().otp_secret as string;
      secrets.push(otpSecret);
      const now = () => t.clock.now().getTime();
      const code = authenticatorCode(otpSecret, now());
      assert.equal((await post('/auth/mfa/enable', { code }, a.jwt)).statusCode, 204);
      assert.equal((await events(a.jwt, 'mfa_enabled')).length, 1);

      const step = await login(t, { email: a.email, password: a.password, cookie: false });
      const mfaTicket = step.json().ticket as string;
      secrets.push(mfaTicket);
      const bad = await post('/auth/mfa/totp', { ticket: mfaTicket, code: wrongCode(otpSecret, now()) });
      assert.equal(bad.statusCode, 401);
      const [failed] = await events(a.jwt, 'sign_in_failed');
      assert.deepEqual(failed?.details, { reason: 'mfa_code' });
      t.clock.advance(30_000);
      const ok = await post('/auth/mfa/totp', {
        ticket: mfaTicket,
        code: authenticatorCode(otpSecret, now()),
        cookie: false,
      });
      assert.equal(ok.statusCode, 200, ok.body);
      const mfaJwt = ok.json().jwt_token as string;
      const [signIn] = await events(mfaJwt, 'sign_in');
      assert.deepEqual(signIn?.details, { method: 'mfa' });

      t.clock.advance(30_000);
      const off = await post('/auth/mfa/disable', { code: authenticatorCode(otpSecret, now()) }, mfaJwt);
      assert.equal(off.statusCode, 204, off.body);
      assert.equal((await events(mfaJwt, 'mfa_disabled')).length, 1);
      const [ended] = await events(mfaJwt, 'session_ended');
      assert.equal(ended?.details.reason, 'mfa_changed');
    });

    it('records the account disabled by the operator, with the sessions it ended', async () => {
      const a = await signUp(t);
      const account = await findAccount(t.ctx.db, a.email);
      assert.equal(await disableUser(authDeps(t.ctx), account), 1);
      const { rows } = await t.ctx.db.query<{ type: string; details: unknown }>(
        'test',
        'SELECT type, details FROM auth.security_events WHERE account_id = $1 ORDER BY created_at, type',
        [await accountIdOf(t, a.userId)],
      );
      const types = rows.map((r) => r.type);
      assert.ok(types.includes('account_disabled'), types.join());
      const ended = rows.find((r) => r.type === 'session_ended');
      const details = typeof ended?.details === 'string' ? JSON.parse(ended.details) : ended?.details;
      assert.deepEqual(details, { reason: 'account_disabled', sessions: [decodeJwt(a.jwt).sid] });
    });

    it('holds no secret in any event: no password, token, ticket, code or TOTP secret', async () => {
      const { rows } = await t.ctx.db.query<Record<string, unknown>>(
        'test',
        'SELECT * FROM auth.security_events',
      );
      assert.ok(rows.length > 20);
      const dump = JSON.stringify(rows);
      assert.ok(secrets.length > 10);
      for (const secret of secrets)
        assert.ok(!dump.includes(secret), `a secret is in the feed: ${secret.slice(0, 8)}…`);
      // Nor a password hash or a refresh-token digest.
      assert.ok(!/\$argon2|\$2[aby]\$/.test(dump));
    });
  });
}
