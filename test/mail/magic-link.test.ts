import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import {
  accountRow,
  buildMailApp,
  createAccount,
  deliverQueuedNow,
  liveTickets,
  type MailTestApp,
} from './fixtures.ts';

/** The path and query of an emailed link, to inject into the app. */
const pathOf = (u: URL) => u.pathname + u.search;

for (const kind of dbKinds()) {
  describe(`magic links [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        MAGIC_LINK_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
        ALLOWED_REDIRECT_URLS: ['http://localhost:*'],
      });
    });
    after(() => t.close());

    const post = (url: string, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url, payload });

    it('registers without a password, then the emailed link activates and redirects with a refresh token', async () => {
      const res = await post('/auth/register', { email: 'magic@example.com' });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.equal(body.user.email, 'magic@example.com');
      assert.equal(body.jwt_token, undefined);
      assert.equal(body.refresh_token, undefined);
      assert.equal(res.headers['set-cookie'], undefined);

      const mail = t.smtp.last('magic@example.com');
      assert.equal(mail.subject, 'Secure register link');
      const link = findLink(mail.text, '/auth/magic-link');
      assert.equal(link.origin, 'http://gatehouse.test');
      assert.equal(link.searchParams.get('action'), 'register');
      assert.equal(link.searchParams.get('token'), mail.headers.get('x-token'));
      assert.equal(findLink(mail.html, '/auth/magic-link').href, link.href);

      const follow = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(follow.statusCode, 302, follow.body);
      const to = new URL(follow.headers.location as string);
      assert.equal(to.origin + to.pathname, 'http://app.test/signed-in');
      const refresh = to.searchParams.get('refresh_token') as string;
      assert.ok(refresh.length >= 32);
      assert.match(String(follow.headers['set-cookie']), /refresh_token=/);
      const me = await t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refresh}` });
      assert.equal(me.statusCode, 200, me.body);
      assert.equal(me.json().user.email, 'magic@example.com');

      const reuse = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(reuse.statusCode, 401);
      assert.equal(reuse.json().code, 'INVALID_TOKEN');
    });

    it('logs in without a password: {magicLink:true} only, the session comes from the emailed link', async () => {
      const res = await post('/auth/login', { email: 'MAGIC@example.com' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { magicLink: true });
      assert.equal(res.headers['set-cookie'], undefined, 'no cookie on the login answer (HBP D1)');
      await t.ctx.tasks.idle();
      const mail = t.smtp.last('magic@example.com');
      assert.equal(mail.subject, 'Secure log in link');
      const link = findLink(mail.text, 'action=log-in');
      assert.ok(!res.body.includes(link.searchParams.get('token') as string));

      const follow = await t.app.inject({ method: 'GET', url: `${pathOf(link)}&cookie=false` });
      assert.equal(follow.statusCode, 302);
      assert.ok(new URL(follow.headers.location as string).searchParams.get('refresh_token'));
      assert.equal(follow.headers['set-cookie'], undefined, 'cookie=false: no cookie set');

      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(link) })).statusCode, 401, 'single use');
    });

    it('answers {magicLink:true} for an unknown address and sends nothing', async () => {
      t.smtp.clear();
      const res = await post('/auth/login', { email: 'stranger@example.com' });
      assert.deepEqual(res.json(), { magicLink: true });
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.messages.length, 0);
    });

    it('refuses an expired link (15 minutes by default, injected clock)', async () => {
      await post('/auth/login', { email: 'magic@example.com' });
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('magic@example.com').text, '/auth/magic-link');
      t.clock.advance(15 * 60_000 + 1000);
      const res = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(res.statusCode, 401);
    });

    it('refuses a link whose action was changed', async () => {
      await post('/auth/login', { email: 'magic@example.com' });
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('magic@example.com').text, '/auth/magic-link');
      link.searchParams.set('action', 'register');
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(link) })).statusCode, 401);
    });

    it('sends the browser to an allowed redirect_to and refuses others with 400', async () => {
      const bad = await post('/auth/login', {
        email: 'magic@example.com',
        redirect_to: 'https://evil.test/',
      });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, 'REDIRECT_NOT_ALLOWED');
      await post('/auth/login', { email: 'magic@example.com', redirect_to: 'http://localhost:5173/cb' });
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('magic@example.com').text, '/auth/magic-link');
      const res = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(res.statusCode, 302);
      assert.match(res.headers.location as string, /^http:\/\/localhost:5173\/cb\?refresh_token=/);
    });

    it('hands an account with MFA an mfa-login ticket instead of a session', async () => {
      await createAccount(t, { email: 'mfa@example.com' });
      await t.ctx.db.query(
        'T',
        `UPDATE auth.accounts SET mfa_enabled = true WHERE email = 'mfa@example.com'`,
      );
      await post('/auth/login', { email: 'mfa@example.com' });
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('mfa@example.com').text, '/auth/magic-link');
      const res = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(res.statusCode, 302);
      const to = new URL(res.headers.location as string);
      assert.equal(to.searchParams.get('mfa'), 'true');
      assert.match(to.searchParams.get('ticket') as string, /^[0-9a-f-]{36}$/);
      assert.equal(to.searchParams.get('refresh_token'), null);
      assert.equal(res.headers['set-cookie'], undefined);
    });

    it('answers 400 for a malformed token or action', async () => {
      for (const q of [
        'token=abc&action=log-in',
        'action=log-in',
        'token=00000000-0000-4000-8000-000000000000&action=x',
      ]) {
        assert.equal(
          (await t.app.inject({ method: 'GET', url: `/auth/magic-link?${q}` })).statusCode,
          400,
          q,
        );
      }
    });

    it('registers while the SMTP server is down; the link goes out once it is back, and works', async () => {
      await t.smtp.stop();
      try {
        const res = await post('/auth/register', { email: 'offline@example.com' });
        assert.equal(res.statusCode, 200, res.body);
      } finally {
        await t.smtp.start();
      }
      assert.equal(t.smtp.to('offline@example.com').length, 0);
      await deliverQueuedNow(t);
      assert.equal(t.smtp.to('offline@example.com').length, 1, 'delivered once');
      const link = findLink(t.smtp.last('offline@example.com').text, '/auth/magic-link');
      const follow = await t.app.inject({ method: 'GET', url: `${link.pathname}${link.search}` });
      assert.equal(follow.statusCode, 302);
      assert.ok(new URL(follow.headers.location as string).searchParams.get('refresh_token'));
    });

    it('resends a register link to an account that never followed it', async () => {
      const res = await post('/auth/register', { email: 'late@example.com' });
      const accountId = (
        await t.ctx.db.query<{ id: string }>(
          'T',
          `SELECT id FROM auth.accounts WHERE email = 'late@example.com'`,
        )
      ).rows[0]?.id as string;
      assert.equal(res.statusCode, 200);
      t.clock.advance(16 * 60_000);
      assert.equal(await liveTickets(t, accountId, 'magic-link'), 0);
      assert.equal((await post('/auth/activate/resend', { email: 'late@example.com' })).statusCode, 204);
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('late@example.com').text, 'action=register');
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(link) })).statusCode, 302);
      assert.equal((await accountRow(t, accountId))?.active, true);
    });
  });
}

describe('email routes in the OpenAPI document', () => {
  it('lists every email-flow route when their settings are on', async () => {
    const t = await buildMailApp('pglite', {
      MAGIC_LINK_ENABLED: true,
      VERIFY_EMAILS: true,
      LOST_PASSWORD_ENABLED: true,
      AUTO_ACTIVATE_NEW_USERS: false,
    });
    try {
      const paths = Object.keys((await t.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths);
      for (const p of [
        '/auth/magic-link',
        '/auth/activate/resend',
        '/auth/change-email/request',
        '/auth/change-email/change',
        '/auth/change-password/request',
        '/auth/change-password/change',
      ]) {
        assert.ok(paths.includes(p), p);
      }
    } finally {
      await t.close();
    }
  });
});

describe('magic links switched off', () => {
  it('returns 404 for /auth/magic-link and requires a password when MAGIC_LINK_ENABLED is false', async () => {
    const t = await buildMailApp('pglite', { MAGIC_LINK_ENABLED: false });
    try {
      await createAccount(t, { email: 'pw@example.com', password: 'pw-123' });
      const link = await t.app.inject({
        method: 'GET',
        url: '/auth/magic-link?action=log-in&token=00000000-0000-4000-8000-000000000000',
      });
      assert.equal(link.statusCode, 404);
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'pw@example.com' },
      });
      assert.equal(login.statusCode, 400);
      assert.match(login.json().message, /"password" is required/);
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.messages.length, 0);
    } finally {
      await t.close();
    }
  });
});

describe('magic links without emails', () => {
  it('answers 503 EMAILS_DISABLED to password-less register and login when EMAILS_ENABLED is false', async () => {
    const t = await buildMailApp('pglite', { MAGIC_LINK_ENABLED: true, EMAILS_ENABLED: false });
    try {
      for (const url of ['/auth/register', '/auth/login']) {
        const res = await t.app.inject({ method: 'POST', url, payload: { email: 'quiet@example.com' } });
        assert.equal(res.statusCode, 503, url);
        assert.equal(res.json().code, 'EMAILS_DISABLED');
      }
      const { rows } = await t.ctx.db.query(
        'T',
        `SELECT 1 FROM auth.accounts WHERE email = 'quiet@example.com'`,
      );
      assert.equal(rows.length, 0);
    } finally {
      await t.close();
    }
  });
});
