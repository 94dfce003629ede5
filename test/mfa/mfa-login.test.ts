import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jwtVerify } from 'jose';
import { refreshSession } from '../../src/auth/sessions.ts';
import { consumeTicket, issueTicket } from '../../src/auth/tickets-store.ts';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { dbKinds } from '../helpers/db.ts';
import { authenticatorCode, post, wrongCode } from './helpers.ts';

const START = Date.parse('2026-03-01T10:00:05Z');
const PASSWORD = 'correct horse battery staple';

interface Registered {
  email: string;
  accountId: string;
  token: string;
  refreshToken: string;
}

for (const kind of dbKinds()) {
  describe(`MFA login: POST /auth/mfa/totp [${kind}]`, () => {
    let t: TestApp;
    let n = 0;
    const now = () => t.clock.now().getTime();
    const nextStep = () => t.clock.advance(30_000);

    async function register(): Promise<Registered> {
      const email = `mfa-login-${++n}@example.com`;
      const res = await post(t, '/auth/register', { email, password: PASSWORD, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      const { rows } = await t.ctx.db.query<{ id: string }>(
        'test-account-id',
        'SELECT id FROM auth.accounts WHERE email = $1',
        [email],
      );
      return {
        email,
        accountId: (rows[0] as { id: string }).id,
        token: body.jwt_token,
        refreshToken: body.refresh_token,
      };
    }

    async function enable(a: Registered): Promise<string> {
      const secret = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret as string;
      const res = await post(t, '/auth/mfa/enable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(res.statusCode, 204, res.body);
      nextStep(); // the enable code is spent; later steps start on a fresh code
      return secret;
    }

    async function mfaTicket(a: Registered): Promise<string> {
      const res = await post(t, '/auth/login', { email: a.email, password: PASSWORD });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['mfa', 'ticket']);
      assert.equal(body.mfa, true);
      assert.equal(res.cookies.length, 0, 'no session cookies before the second step');
      return body.ticket;
    }

    const totp = (body: unknown) => post(t, '/auth/mfa/totp', body);

    before(async () => {
      t = await buildTestApp(kind, HS, { clock: new TestClock(START) });
    });
    after(() => t.close());

    it('runs the full flow: register, generate, enable, login, totp, disable, then login without MFA', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      const res = await totp({ ticket, code: authenticatorCode(secret, now()), cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['jwt_expires_in', 'jwt_token', 'refresh_token', 'user']);
      assert.equal(body.user.email, a.email);
      assert.equal(body.jwt_expires_in, t.config.JWT_EXPIRES_IN * 60_000);
      const { payload } = await jwtVerify(body.jwt_token, t.ctx.keys.verifyKey, {
        currentDate: t.clock.now(),
      });
      assert.equal(payload.sub, body.user.id);
      await refreshSession(t.ctx, body.refresh_token); // a real session

      nextStep();
      const off = await post(
        t,
        '/auth/mfa/disable',
        { code: authenticatorCode(secret, now()) },
        body.jwt_token,
      );
      assert.equal(off.statusCode, 204, off.body);
      const plain = await post(t, '/auth/login', { email: a.email, password: PASSWORD, cookie: false });
      assert.equal(plain.statusCode, 200);
      assert.equal(typeof plain.json().jwt_token, 'string');
      assert.equal(plain.json().mfa, undefined);
    });

    it('sets the session cookies and leaves refresh_token out of the body when cookie is omitted', async () => {
      const a = await register();
      const secret = await enable(a);
      const res = await totp({ ticket: await mfaTicket(a), code: authenticatorCode(secret, now()) });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().refresh_token, undefined);
      const names = res.cookies.map((c) => c.name).sort();
      assert.deepEqual(names, ['permission_variables', 'refresh_token']);
      for (const c of res.cookies) assert.equal(c.httpOnly, true);
    });

    it('refuses a code already accepted for the account (replay), on a fresh ticket too', async () => {
      const a = await register();
      const secret = await enable(a);
      const code = authenticatorCode(secret, now());
      assert.equal((await totp({ ticket: await mfaTicket(a), code })).statusCode, 200);
      const replay = await totp({ ticket: await mfaTicket(a), code });
      assert.equal(replay.statusCode, 401);
      assert.equal(replay.json().code, 'INVALID_TOTP');
    });

    it('uses a ticket once: the same ticket with the next code answers 401', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      assert.equal((await totp({ ticket, code: authenticatorCode(secret, now()) })).statusCode, 200);
      nextStep();
      const again = await totp({ ticket, code: authenticatorCode(secret, now()) });
      assert.equal(again.statusCode, 401);
      assert.equal(again.json().code, 'INVALID_TICKET');
    });

    it('kills a ticket after five wrong codes: the sixth attempt is refused even with the right code', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      for (let i = 1; i <= 5; i++) {
        const res = await totp({ ticket, code: wrongCode(secret, now()) });
        assert.equal(res.statusCode, 401);
        assert.equal(res.json().code, 'INVALID_TOTP', `attempt ${i}`);
      }
      const sixth = await totp({ ticket, code: authenticatorCode(secret, now()) });
      assert.equal(sixth.statusCode, 401);
      assert.equal(sixth.json().code, 'INVALID_TICKET');
      // The account itself is fine: a new ticket with the right code signs in.
      const fresh = await totp({ ticket: await mfaTicket(a), code: authenticatorCode(secret, now()) });
      assert.equal(fresh.statusCode, 200);
    });

    it('allows no more than five codes per ticket when the attempts arrive at once', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      const results = await Promise.all(
        Array.from({ length: 12 }, () => totp({ ticket, code: wrongCode(secret, now()) })),
      );
      const codes = results.map((r) => r.json().code);
      assert.equal(codes.filter((c) => c === 'INVALID_TOTP').length, 5);
      assert.equal(codes.filter((c) => c === 'INVALID_TICKET').length, 7);
    });

    it('limits wrong codes per account across tickets (429, Retry-After)', async () => {
      const a = await register();
      const secret = await enable(a);
      let ticket = '';
      for (let i = 0; i < t.config.RATE_LIMIT_MFA_ACCOUNT_MAX; i++) {
        if (i % 5 === 0) ticket = await mfaTicket(a); // a ticket allows five
        const res = await totp({ ticket, code: wrongCode(secret, now()) });
        assert.equal(res.statusCode, 401);
      }
      const limited = await totp({ ticket: await mfaTicket(a), code: authenticatorCode(secret, now()) });
      assert.equal(limited.statusCode, 429);
      assert.ok(Number(limited.headers['retry-after']) > 0);
    });

    it('answers 401 for an expired ticket', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      t.clock.advance(t.config.TICKET_MFA_EXPIRES_IN * 60_000 + 1000);
      const res = await totp({ ticket, code: authenticatorCode(secret, now()) });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'INVALID_TICKET');
    });

    it('answers 401 for an unknown ticket and for a ticket of another purpose, which stays usable', async () => {
      const a = await register();
      const secret = await enable(a);
      const unknown = await totp({ ticket: crypto.randomUUID(), code: authenticatorCode(secret, now()) });
      assert.equal(unknown.statusCode, 401);
      assert.equal(unknown.json().code, 'INVALID_TICKET');
      const { ticket } = await issueTicket(t.ctx.db, t.config, t.clock.now(), {
        accountId: a.accountId,
        purpose: 'password-reset',
      });
      const wrongPurpose = await totp({ ticket, code: authenticatorCode(secret, now()) });
      assert.equal(wrongPurpose.statusCode, 401);
      assert.equal(wrongPurpose.json().code, 'INVALID_TICKET');
      assert.ok(await consumeTicket(t.ctx.db, t.clock.now(), ticket, 'password-reset'));
    });

    it('answers 401 for a login ticket once MFA was disabled', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      const off = await post(t, '/auth/mfa/disable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(off.statusCode, 204);
      nextStep();
      const res = await totp({ ticket, code: authenticatorCode(secret, now()) });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'INVALID_TICKET');
    });

    it('answers 400 for malformed input without spending the ticket', async () => {
      const a = await register();
      const secret = await enable(a);
      const ticket = await mfaTicket(a);
      const code = authenticatorCode(secret, now());
      const cases: [unknown, string][] = [
        [{ ticket: 'not-a-ticket', code }, '"ticket" must be a valid uuid'],
        [{ ticket: 42, code }, '"ticket" must be a string'],
        [{ code }, '"ticket" is required'],
        [{ ticket }, '"code" is required'],
        [{ ticket, code: Number(`1${code.slice(1)}`) }, '"code" must be a string'],
        [{ ticket, code: 'abc123' }, '"code" has an invalid format'],
        [{ ticket, code: '12345' }, '"code" length must be at least 6 characters long'],
        [{ ticket, code: '1234567' }, '"code" length must be less than or equal to 6 characters long'],
        [{ ticket, code, cookie: 'false' }, '"cookie" must be a boolean'],
        [{ ticket, code, remember: true }, '"remember" is not allowed'],
      ];
      for (const [body, message] of cases) {
        const res = await totp(body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().message, message, JSON.stringify(body));
      }
      const bare = await post(t, '/auth/mfa/totp', undefined);
      assert.equal(bare.statusCode, 400);
      assert.equal(bare.json().message, '"ticket" is required');
      for (let i = 0; i < 5; i++) {
        const bad = await t.app.inject({
          method: 'POST',
          url: '/auth/mfa/totp',
          headers: { 'content-type': 'application/json' },
          payload: '{"ticket":',
        });
        assert.equal(bad.statusCode, 400);
      }
      // Nothing above counted as an attempt: the ticket still works.
      assert.equal((await totp({ ticket, code })).statusCode, 200);
    });

    it('generate while MFA is enabled leaves login with the active secret working', async () => {
      const a = await register();
      const active = await enable(a);
      const pending = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret as string;
      const ticket = await mfaTicket(a);
      const withPending = await totp({ ticket, code: authenticatorCode(pending, now()) });
      assert.equal(withPending.statusCode, 401);
      const withActive = await totp({ ticket, code: authenticatorCode(active, now()) });
      assert.equal(withActive.statusCode, 200);
    });

    it('disable ends the other sessions of the account and keeps the caller’s own (cookie)', async () => {
      const a = await register();
      const secret = await enable(a);
      const first = await totp({ ticket: await mfaTicket(a), code: authenticatorCode(secret, now()) });
      assert.equal(first.statusCode, 200);
      nextStep();
      const second = await totp({
        ticket: await mfaTicket(a),
        code: authenticatorCode(secret, now()),
        cookie: false,
      });
      assert.equal(second.statusCode, 200);
      nextStep();
      const cookies = Object.fromEntries(first.cookies.map((c) => [c.name, c.value]));
      const off = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/disable',
        // The browser is on the service's own page (a cookie request from elsewhere is refused: CSRF).
        headers: { origin: t.config.SERVER_URL },
        cookies,
        payload: { code: authenticatorCode(secret, now()) },
      });
      assert.equal(off.statusCode, 204, off.body);
      await assert.rejects(refreshSession(t.ctx, second.json().refresh_token), {
        code: 'INVALID_REFRESH_TOKEN',
      });
      await assert.rejects(refreshSession(t.ctx, a.refreshToken), { code: 'INVALID_REFRESH_TOKEN' });
      const own = t.app.unsignCookie(String(cookies.refresh_token)).value as string;
      await refreshSession(t.ctx, own);
    });

    it('disable keeps the sign-in of a bearer-only caller (the one its access token came from)', async () => {
      const a = await register();
      const secret = await enable(a);
      const first = await totp({
        ticket: await mfaTicket(a),
        code: authenticatorCode(secret, now()),
        cookie: false,
      });
      assert.equal(first.statusCode, 200);
      nextStep();
      const second = await totp({
        ticket: await mfaTicket(a),
        code: authenticatorCode(secret, now()),
        cookie: false,
      });
      assert.equal(second.statusCode, 200);
      nextStep();
      const off = await post(
        t,
        '/auth/mfa/disable',
        { code: authenticatorCode(secret, now()) },
        first.json().jwt_token,
      );
      assert.equal(off.statusCode, 204, off.body);
      await refreshSession(t.ctx, first.json().refresh_token);
      await assert.rejects(refreshSession(t.ctx, second.json().refresh_token), {
        code: 'INVALID_REFRESH_TOKEN',
      });
      await assert.rejects(refreshSession(t.ctx, a.refreshToken), { code: 'INVALID_REFRESH_TOKEN' });
    });
  });

  describe(`MFA in the API description [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, HS);
    });
    after(() => t.close());

    it('lists the four /auth/mfa routes in /openapi.json with their request and response schemas', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      for (const route of ['generate', 'enable', 'disable', 'totp']) {
        const op = doc.paths[`/auth/mfa/${route}`]?.post;
        assert.ok(op, route);
        assert.ok(op.requestBody, `${route} request body`);
        assert.ok(
          Object.keys(op.responses).includes(route === 'generate' || route === 'totp' ? '200' : '204'),
        );
        assert.ok(op.responses['400'] && op.responses['401'], `${route} error responses`);
      }
    });
  });

  describe(`MFA switched off [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, MFA_ENABLED: false });
    });
    after(() => t.close());

    it('answers 404 on all four /auth/mfa routes when MFA_ENABLED is false', async () => {
      const reg = await post(t, '/auth/register', {
        email: 'off@example.com',
        password: PASSWORD,
        cookie: false,
      });
      const token = reg.json().jwt_token as string;
      for (const [route, body] of [
        ['generate', undefined],
        ['enable', { code: '123456' }],
        ['disable', { code: '123456' }],
        ['totp', { ticket: crypto.randomUUID(), code: '123456' }],
      ] as const) {
        const res = await post(t, `/auth/mfa/${route}`, body, token);
        assert.equal(res.statusCode, 404, route);
        assert.equal(res.json().code, 'NOT_FOUND');
      }
    });
  });
}
