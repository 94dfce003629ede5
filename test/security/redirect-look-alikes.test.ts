/**
 * Issue 25, point 2: a `*` in ALLOWED_REDIRECT_URLS stood for any run of characters of the whole URL, so
 * `https://*.example.com/*` accepted `https://evil.com/.example.com/steal` and the emailed link (or the
 * provider sign-in) carried a refresh token to evil.com. Every route that takes `redirect_to` is attacked
 * here over HTTP with look-alikes that a browser would take somewhere else, and CORS and the CSRF check,
 * which use the same matcher, with look-alike origins. The allowed targets keep working end to end.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { createAccount, newEmail } from '../helpers/accounts.ts';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, type MailTestApp } from '../mail/fixtures.ts';

const ALLOWED_REDIRECT_URLS = [
  'https://*.example.com/*',
  'http://localhost:*',
  'https://app.example.net/auth/*',
];

/** Targets a browser would visit outside every allowed entry. */
const LOOK_ALIKES = [
  'https://evil.com/.example.com/steal',
  'https://evil.com/.example.com',
  'https://evil.com?.example.com',
  'https://evil.com#.example.com',
  'https://example.com.evil.com/cb',
  'https://good.example.com@evil.com/cb',
  'https://evil.com\\.example.com',
  'https:\\\\evil.com\\.example.com',
  'https://evil.com%2f.example.com',
  'https://evil.com%5c.example.com',
  'https://EVIL.COM/.EXAMPLE.COM',
  'https://a.example.com./cb',
  'https://evil.com/.app.example.net/auth/x',
  'https://app.example.net/elsewhere?/auth/x',
];

/** Targets that must keep working (upper case and Unicode are the same hosts once parsed). */
const ALLOWED = [
  'https://a.example.com/x',
  'https://a.b.example.com/cb',
  'https://A.Example.COM/x',
  'http://localhost:5173/cb',
  'https://app.example.net/auth/cb?next=%2Fhome',
];

function refused(res: LightMyRequestResponse, what: string): void {
  assert.equal(res.statusCode, 400, `${what}: ${res.body}`);
  assert.equal(res.json().code, 'REDIRECT_NOT_ALLOWED', what);
}

for (const kind of dbKinds()) {
  describe(`redirect_to, CORS and CSRF look-alikes [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        MAGIC_LINK_ENABLED: true,
        LOST_PASSWORD_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/welcome',
        ALLOWED_REDIRECT_URLS,
        CORS_ORIGINS: ['https://*.example.com'],
        GITHUB_ENABLED: true,
        GITHUB_CLIENT_ID: 'gh-client',
        GITHUB_CLIENT_SECRET: 'gh-secret',
      });
    });
    after(() => t.close());

    const post = (url: string, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url, payload });
    const providerStart = (target: string) =>
      t.app.inject({
        method: 'GET',
        url: `/auth/providers/github?redirect_to=${encodeURIComponent(target)}`,
      });

    it('an attacker cannot send the activation link, and its refresh token, to a look-alike of an allowed subdomain (register)', async () => {
      const sent = t.smtp.messages.length;
      for (const target of LOOK_ALIKES) {
        const email = newEmail('lookalike');
        refused(await post('/auth/register', { email, password: 'pw-123456', redirect_to: target }), target);
        const { rows } = await t.ctx.db.query(
          'TestAccountByEmail',
          'SELECT 1 FROM auth.accounts WHERE email = $1',
          [email],
        );
        assert.equal(rows.length, 0, `${target}: no account`);
      }
      assert.equal(t.smtp.messages.length, sent, 'no email sent');
    });

    it('an attacker cannot start a provider sign-in that lands on a look-alike', async () => {
      for (const target of LOOK_ALIKES) refused(await providerStart(target), target);
    });

    it('an attacker cannot have a magic link or a reset link point at a look-alike', async () => {
      const email = newEmail('victim');
      await createAccount(t, { email, password: 'pw-123456', active: true });
      const sent = t.smtp.messages.length;
      for (const target of LOOK_ALIKES) {
        refused(await post('/auth/login', { email, redirect_to: target }), `magic link ${target}`);
        refused(
          await post('/auth/change-password/request', { email, redirect_to: target }),
          `reset ${target}`,
        );
      }
      assert.equal(t.smtp.messages.length, sent, 'no email sent');
    });

    it('allowed targets keep working: the activation link lands there with the refresh token', async () => {
      for (const target of ALLOWED) {
        const email = newEmail('allowed');
        const res = await post('/auth/register', { email, password: 'pw-123456', redirect_to: target });
        assert.equal(res.statusCode, 200, `${target}: ${res.body}`);
        const link = findLink(t.smtp.last(email).text, '/auth/activate');
        const follow = await t.app.inject({ method: 'GET', url: link.pathname + link.search });
        assert.equal(follow.statusCode, 302, target);
        const to = new URL(follow.headers.location as string);
        const want = new URL(target);
        assert.equal(to.origin + to.pathname, want.origin + want.pathname, target);
        assert.ok(to.searchParams.get('refresh_token'), `${target}: refresh token delivered`);

        const start = await providerStart(target);
        assert.equal(start.statusCode, 302, `${target}: ${start.body}`);
        assert.match(String(start.headers.location), /^https:\/\/github\.com\/login\/oauth\/authorize\?/);
      }
      const email = newEmail('reset');
      await createAccount(t, { email, password: 'pw-123456', active: true });
      const reset = await post('/auth/change-password/request', { email, redirect_to: ALLOWED[1] });
      assert.equal(reset.statusCode, 204, reset.body);
      assert.equal(findLink(t.smtp.last(email).text, '/cb').hostname, 'a.b.example.com');
      const magic = await post('/auth/login', { email, redirect_to: ALLOWED[3] });
      assert.equal(magic.statusCode, 200, magic.body);
    });

    it('CORS does not reflect a look-alike origin, and reflects the allowed subdomains', async () => {
      const preflight = (origin: string) =>
        t.app.inject({
          method: 'OPTIONS',
          url: '/auth/login',
          headers: { origin, 'access-control-request-method': 'POST' },
        });
      for (const origin of [
        'https://evil.com/.example.com',
        'https://evil.com?.example.com',
        'https://evil.com#.example.com',
        'https://example.com.evil.com',
        'https://good.example.com@evil.com',
        'https://evil.com\\.example.com',
        'https://evil.com%2f.example.com',
        'https://.example.com',
        'https://example.com',
      ]) {
        const res = await preflight(origin);
        assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
      }
      for (const origin of ['https://a.example.com', 'https://a.b.example.com']) {
        assert.equal((await preflight(origin)).headers['access-control-allow-origin'], origin);
      }
    });

    it('a cross-site logout from a look-alike origin is refused; an allowed origin is not', async () => {
      const email = newEmail('csrf');
      await createAccount(t, { email, password: 'pw-123456', active: true });
      const session = async () => {
        const res = await post('/auth/login', { email, password: 'pw-123456' });
        assert.equal(res.statusCode, 200, res.body);
        const cookie = String(res.headers['set-cookie']).match(/refresh_token=([^;]+)/)?.[1];
        assert.ok(cookie);
        return { refresh_token: decodeURIComponent(cookie) };
      };
      const logout = (origin: string, cookies: Record<string, string>) =>
        t.app.inject({ method: 'POST', url: '/auth/logout', headers: { origin }, cookies });
      const cookies = await session();
      for (const origin of [
        'https://evil.com/.example.com',
        'https://evil.com?.example.com',
        'https://example.com.evil.com',
        'https://good.example.com@evil.com',
        'https://evil.com\\.app.example.net',
        'https://.example.com',
      ]) {
        const res = await logout(origin, cookies);
        assert.equal(res.statusCode, 403, `${origin}: ${res.body}`);
        assert.equal(res.json().code, 'CSRF', origin);
      }
      for (const origin of ['https://a.example.com', 'https://app.example.net', 'http://localhost:5173']) {
        const res = await logout(origin, await session());
        assert.notEqual(res.statusCode, 403, `${origin}: ${res.body}`);
      }
    });
  });
}
