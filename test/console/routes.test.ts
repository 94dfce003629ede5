/**
 * The console's routes without a browser: when it is served (on outside production, off in production
 * unless turned on, and then only for the admin secret), its Content-Security-Policy, the development
 * outbox (this machine only, not through a proxy on it, never in production), emailed links landing on the console when no
 * REDIRECT_URL_* names an app, what is switched on, and the reads the pages make of the signed-in person
 * (two-factor state, where the storage rules let them write). The browser walk-through is console.test.ts.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { configFrom } from '../../src/config.ts';
import { CONSOLE_CSP } from '../../src/console/plugin.ts';
import type { Switch } from '../../src/console/switches.ts';
import { writableFolders } from '../../src/console/writable.ts';
import { DEFAULT_RULES, HBP_RULES, parseRules } from '../../src/storage/rules/rules.ts';
import { bearer, HS, setCookies, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

const ADMIN_SECRET = 'an-admin-secret-of-at-least-32-characters';

/** Settings a production start needs (the test helper brings its own database). */
const PRODUCTION = {
  ...HS,
  NODE_ENV: 'production',
  DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
  COOKIE_SECRET: 'c'.repeat(32),
  MFA_ENCRYPTION_KEY: 'm'.repeat(32),
  EMAILS_ENABLED: false,
} as const;

const basic = (password: string, user = 'admin') => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
});

interface OutboxMessage {
  to: string;
  subject: string;
  template: string;
  text: string;
  link?: string;
}

async function outbox(t: TestApp): Promise<OutboxMessage[]> {
  await t.ctx.tasks.idle();
  const res = await t.app.inject({ url: '/console/api/outbox' });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().messages;
}

const pathOf = (link: string) => {
  const u = new URL(link);
  return u.pathname + u.search;
};

describe('console pages outside production', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite');
  });
  after(() => t.close());

  it('serves the page at /console/ (and /console redirects there) with a policy that allows no inline script', async () => {
    const bare = await t.app.inject({ url: '/console' });
    assert.equal(bare.statusCode, 302);
    assert.equal(bare.headers.location, '/console/');
    const res = await t.app.inject({ url: '/console/' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.match(res.body, /<script type="module" src="main.js"><\/script>/);
    assert.doesNotMatch(
      res.body,
      /<script>|<script [^>]*>[^<]|\sstyle="|\son[a-z]+="/,
      'no inline script or style',
    );
    const csp = String(res.headers['content-security-policy']);
    assert.equal(csp, CONSOLE_CSP);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(csp, /frame-ancestors 'none'/);
  });

  it('serves its scripts and styles with their types and revalidates them by ETag', async () => {
    for (const [file, type] of [
      ['main.js', /^text\/javascript/],
      ['console.css', /^text\/css/],
    ] as const) {
      const res = await t.app.inject({ url: `/console/${file}` });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), type);
      assert.equal(res.headers['cache-control'], 'no-cache');
      const again = await t.app.inject({
        url: `/console/${file}`,
        headers: { 'if-none-match': String(res.headers.etag) },
      });
      assert.equal(again.statusCode, 304);
    }
  });

  it('answers 404 for any other name, including paths that climb out of its folder', async () => {
    for (const url of [
      '/console/nothing.js',
      '/console/plugin.ts',
      '/console/..%2fplugin.ts',
      '/console/%2e%2e/%2e%2e/package.json',
      '/console/assets/main.js',
    ]) {
      const res = await t.app.inject({ url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().code, 'NOT_FOUND', url);
    }
  });

  it('tells the page which features are on', async () => {
    const res = await t.app.inject({ url: '/console/api/settings' });
    assert.equal(res.statusCode, 200);
    const { flows, providers, ...features } = res.json();
    assert.ok(Array.isArray(flows) && Array.isArray(providers));
    assert.deepEqual(features, {
      production: false,
      auth: true,
      storage: true,
      register: true,
      autoActivate: true,
      magicLink: false,
      lostPassword: false,
      changeEmail: true,
      verifyEmails: false,
      mfa: true,
      passkeys: true,
      emails: true,
      // No admin secret and no ADMIN_ROLE here: the admin pages have nothing to sign in with.
      adminRole: null,
      adminSecret: false,
      outbox: true,
    });
  });

  it('says, with zero set-up, that the email flows are off and which setting turns each on', async () => {
    const { flows, providers } = (await t.app.inject({ url: '/console/api/settings' })).json() as {
      flows: Switch[];
      providers: Switch[];
    };
    const row = (list: Switch[], flow: string) => {
      const found = list.find((f) => f.flow === flow);
      assert.ok(found, flow);
      return [found.on, found.turnOn, found.needs];
    };
    assert.deepEqual(row(flows, 'Activation emails'), [false, 'AUTO_ACTIVATE_NEW_USERS=false', []]);
    assert.deepEqual(row(flows, 'Lost password'), [false, 'LOST_PASSWORD_ENABLED=true', []]);
    assert.deepEqual(row(flows, 'Magic links'), [false, 'MAGIC_LINK_ENABLED=true', []]);
    assert.deepEqual(row(flows, 'Email change confirmation'), [false, 'VERIFY_EMAILS=true', []]);
    assert.deepEqual(row(flows, 'Deleting one’s own account'), [false, 'ALLOW_USER_SELF_DELETE=true', []]);
    assert.deepEqual(row(flows, 'Anonymous sign-in'), [false, 'ANONYMOUS_USERS_ENABLED=true', []]);
    assert.deepEqual(row(flows, 'Two-factor sign-in (TOTP)'), [true, 'MFA_ENABLED=true', []]);
    assert.deepEqual(row(flows, 'Passkeys'), [true, 'WEBAUTHN_ENABLED=true', []]);
    assert.deepEqual(row(flows, 'Emails'), [true, 'EMAILS_ENABLED=true', []]);
    assert.deepEqual(row(providers, 'GitHub'), [
      false,
      'GITHUB_ENABLED=true',
      ['GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'],
    ]);
    assert.equal(providers.length, 9);
    assert.ok(
      providers.every((p) => p.on === false),
      'no provider is on without set-up',
    );
  });

  it('serves a favicon, linked from the page, so a browser asks for nothing that is missing', async () => {
    const page = await t.app.inject({ url: '/console/' });
    assert.match(page.body, /<link rel="icon" href="favicon.svg" type="image\/svg\+xml">/);
    const icon = await t.app.inject({ url: '/console/favicon.svg' });
    assert.equal(icon.statusCode, 200);
    assert.equal(icon.headers['content-type'], 'image/svg+xml');
    assert.match(icon.body, /^<svg /);
  });

  it('tells a signed-out page, with 200, that there is no refresh cookie to try', async () => {
    const none = await t.app.inject({ url: '/console/api/session' });
    assert.equal(none.statusCode, 200);
    assert.deepEqual(none.json(), { refreshCookie: false });
    const r = await t.app.inject({
      method: 'POST',
      url: '/auth/register',
      payload: { email: 'cookie-holder@example.com', password: 'pw-123456-long', cookie: true },
    });
    const refresh = setCookies(r)['refresh_token']?.value as string;
    const held = await t.app.inject({
      url: '/console/api/session',
      headers: { cookie: `refresh_token=${refresh}` },
    });
    assert.deepEqual(held.json(), { refreshCookie: true });
    // A cookie the service did not sign is not one to try.
    const forged = await t.app.inject({
      url: '/console/api/session',
      headers: { cookie: 'refresh_token=made-up' },
    });
    assert.deepEqual(forged.json(), { refreshCookie: false });
  });

  it('tells the signed-in person their two-factor state and where the default rules let them write', async () => {
    const anonymous = await t.app.inject({ url: '/console/api/me' });
    assert.equal(anonymous.statusCode, 401);
    assert.equal(anonymous.json().code, 'UNAUTHENTICATED');
    const who = await signUp(t);
    const res = await t.app.inject({ url: '/console/api/me', headers: bearer(who.jwt) });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), {
      mfa: false,
      writable: [
        { folder: `user/${who.userId}/`, nested: false },
        { folder: `public/${who.userId}/`, nested: true },
      ],
    });
    await t.ctx.db.query('test-mfa-on', 'UPDATE auth.accounts SET mfa_enabled = true WHERE user_id = $1', [
      who.userId,
    ]);
    const after = await t.app.inject({ url: '/console/api/me', headers: bearer(who.jwt) });
    assert.equal(after.json().mfa, true);
  });

  it('points the email-change notice at the console, not at the JSON 404 of the bare SERVER_URL', async () => {
    const who = await signUp(t);
    const res = await t.app.inject({
      method: 'POST',
      url: '/auth/change-email',
      headers: bearer(who.jwt),
      payload: { new_email: 'moved-away@example.com' },
    });
    assert.equal(res.statusCode, 204, res.body);
    const notice = (await outbox(t)).find((m) => m.template === 'notify-email-change' && m.to === who.email);
    const link = new URL(notice?.link as string);
    assert.equal(link.href, new URL('/console/', t.ctx.config.SERVER_URL).href);
    const landed = await t.app.inject({ url: pathOf(link.href) });
    assert.equal(landed.statusCode, 200);
    assert.match(String(landed.headers['content-type']), /^text\/html/);
  });
});

describe('the folders the console offers for uploads, derived from the storage rules', () => {
  const auth = { 'user-id': 'u1', 'allowed-roles': ['user'], 'default-role': 'user' };
  const folders = (text: string) =>
    writableFolders(parseRules(text, 'test'), auth).map((w) => `${w.folder}${w.nested ? '…' : ''}`);

  it('are the own folder and the own public folder under the built-in rules, and all of public/ under HBP’s', () => {
    assert.deepEqual(folders(DEFAULT_RULES), ['user/u1/', 'public/u1/…']);
    assert.deepEqual(folders(HBP_RULES), ['user/u1/', 'public/…']);
  });

  it('leave out entries whose rules refuse this person, and keep those that wait for the file’s size', () => {
    const text = `paths:
  /team/:teamId/:file:
    create: "request.auth['team-id'] === teamId"
  /inbox/:userId/*:
    create: "request.auth['user-id'] === userId && resource.size < 1000"
  /notes.txt:
    write: 'true'
  /archive/:userId/:year/*:
    read: 'true'
`;
    assert.deepEqual(folders(text), ['inbox/u1/…']);
    assert.deepEqual(folders('paths:\n  /public*:\n    read: "true"\n'), []);
  });
});

describe('CONSOLE_ENABLED=false', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { CONSOLE_ENABLED: false });
  });
  after(() => t.close());

  it('serves no console and no outbox', async () => {
    for (const url of ['/console', '/console/', '/console/main.js', '/console/api/outbox']) {
      assert.equal((await t.app.inject({ url })).statusCode, 404, url);
    }
  });
});

for (const kind of dbKinds()) {
  describe(`the development outbox and emailed links [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        SERVER_URL: 'http://localhost:4000',
        AUTO_ACTIVATE_NEW_USERS: false,
        LOST_PASSWORD_ENABLED: true,
        VERIFY_EMAILS: true,
        RATE_LIMIT_ENABLED: false,
      });
    });
    after(() => t.close());

    const register = (email: string) =>
      t.app.inject({ method: 'POST', url: '/auth/register', payload: { email, password: 'pw-123456-long' } });

    it('lists each email with its subject, text and link, newest first', async () => {
      assert.equal((await register('first@example.com')).statusCode, 200);
      assert.equal((await register('second@example.com')).statusCode, 200);
      const messages = await outbox(t);
      assert.deepEqual(
        messages.slice(0, 2).map((m) => [m.to, m.template]),
        [
          ['second@example.com', 'activate-account'],
          ['first@example.com', 'activate-account'],
        ],
      );
      const first = messages[1] as OutboxMessage;
      assert.equal(first.subject, 'Confirm your email address');
      assert.match(first.link ?? '', /^http:\/\/localhost:4000\/auth\/activate\?ticket=/);
      assert.ok(first.text.includes(first.link as string), 'the text carries the link');
    });

    it('lands a followed activation link on the console, signed in by cookie, no token in the address', async () => {
      await register('lands@example.com');
      const link = (await outbox(t)).find((m) => m.to === 'lands@example.com')?.link as string;
      const res = await t.app.inject({ url: pathOf(link) });
      assert.equal(res.statusCode, 302);
      assert.equal(res.headers.location, 'http://localhost:4000/console/?signed_in=true');
      const cookies = (res.cookies as { name: string }[]).map((c) => c.name).sort();
      assert.deepEqual(cookies, ['permission_variables', 'refresh_token']);
    });

    it('lands a spent or made-up link on the console with the error code', async () => {
      const res = await t.app.inject({ url: '/auth/activate?ticket=00000000-0000-4000-8000-000000000000' });
      assert.equal(res.statusCode, 302);
      assert.equal(res.headers.location, 'http://localhost:4000/console/?error=INVALID_TICKET');
    });

    it('points reset and email-change links at the console pages that complete them', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/request',
        payload: { email: 'lands@example.com' },
      });
      assert.equal(res.statusCode, 204);
      const reset = (await outbox(t)).find((m) => m.template === 'lost-password');
      const url = new URL(reset?.link as string);
      assert.equal(`${url.origin}${url.pathname}`, 'http://localhost:4000/console/');
      assert.equal(url.searchParams.get('type'), 'password-reset');
      assert.match(url.searchParams.get('ticket') ?? '', /^[0-9a-f-]{36}$/);
      // The page completes it with the route any app would call.
      const done = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/change',
        payload: { ticket: url.searchParams.get('ticket'), new_password: 'a-new-password-123' },
      });
      assert.equal(done.statusCode, 204, done.body);
    });

    it('serves the outbox only to this machine: refused to another address', async () => {
      const res = await t.app.inject({ url: '/console/api/outbox', remoteAddress: '192.168.1.20' });
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().code, 'FORBIDDEN');
      assert.doesNotMatch(res.body, /ticket/);
    });

    it('refuses the outbox to a page of another site whose name resolves here (DNS rebinding)', async () => {
      const res = await t.app.inject({
        url: '/console/api/outbox',
        headers: { host: 'attacker.example:4000' },
      });
      assert.equal(res.statusCode, 403);
      assert.doesNotMatch(res.body, /ticket/);
      for (const host of ['localhost:4000', '127.0.0.1:4000', '[::1]:4000']) {
        const ok = await t.app.inject({ url: '/console/api/outbox', headers: { host } });
        assert.equal(ok.statusCode, 200, host);
      }
    });
  });
}

/** A GET to the listening app from 127.0.0.1, with the Host and headers a local proxy would send. */
function getFromLoopback(
  port: number,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the development outbox behind a tunnel or reverse proxy on this machine', () => {
  let t: TestApp;
  let port: number;
  const tunnel = 'abc.ngrok.app';
  before(async () => {
    // The developer points SERVER_URL at the tunnel so that emailed links work from a phone.
    t = await buildTestApp('pglite', {
      SERVER_URL: `https://${tunnel}`,
      AUTO_ACTIVATE_NEW_USERS: false,
      HASURA_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
    const reg = await t.app.inject({
      method: 'POST',
      url: '/auth/register',
      payload: { email: 'tunnelled@example.com', password: 'pw-123456-long' },
    });
    assert.equal(reg.statusCode, 200, reg.body);
    await t.ctx.tasks.idle();
  });
  after(() => t.close());

  it('an internet client reaching the service through ngrok cannot read the tickets in the outbox', async () => {
    const through: Record<string, string>[] = [
      // ngrok's default: the public Host, with the forwarding headers.
      { host: tunnel, 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' },
      // The public Host alone (a proxy that adds no forwarding header).
      { host: tunnel },
      // ngrok --host-header=rewrite, or nginx with proxy_set_header X-Forwarded-For.
      { host: `localhost:${port}`, 'x-forwarded-for': '203.0.113.7' },
      { host: `127.0.0.1:${port}`, 'x-real-ip': '203.0.113.7' },
      { host: `localhost:${port}`, forwarded: 'for=203.0.113.7;proto=https' },
      { host: `localhost:${port}`, via: '1.1 nginx' },
    ];
    for (const headers of through) {
      const res = await getFromLoopback(port, '/console/api/outbox', headers);
      assert.equal(res.status, 403, JSON.stringify(headers));
      assert.equal(JSON.parse(res.body).code, 'FORBIDDEN');
      assert.doesNotMatch(res.body, /ticket=/);
    }
  });

  it('serves the outbox to a browser on this machine (a loopback Host, no proxy in between)', async () => {
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `app.localhost:${port}`]) {
      const res = await getFromLoopback(port, '/console/api/outbox', { host });
      assert.equal(res.status, 200, host);
      assert.match(res.body, /tunnelled@example\.com/);
    }
  });

  it('serves it through the tunnel with the admin secret; wrong secrets count as guesses', async () => {
    const proxied = { host: tunnel, 'x-forwarded-for': '203.0.113.7' };
    const ok = await getFromLoopback(port, '/console/api/outbox', {
      ...proxied,
      'x-admin-secret': ADMIN_SECRET,
    });
    assert.equal(ok.status, 200);
    assert.match(ok.body, /tunnelled@example\.com/);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const wrong = await getFromLoopback(port, '/console/api/outbox', {
        ...proxied,
        'x-admin-secret': `wrong-guess-${i}`,
      });
      assert.doesNotMatch(wrong.body, /ticket=/);
      statuses.push(wrong.status);
    }
    assert.equal(statuses[0], 403);
    assert.equal(statuses.at(-1), 429, `the guesses were limited: ${statuses.join(' ')}`);
  });
});

describe('emailed links without the console', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { CONSOLE_ENABLED: false, AUTO_ACTIVATE_NEW_USERS: false });
  });
  after(() => t.close());

  it('answer a bad ticket with 401, as before', async () => {
    const res = await t.app.inject({ url: '/auth/activate?ticket=00000000-0000-4000-8000-000000000000' });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().code, 'INVALID_TICKET');
  });
});

describe('the console in production', () => {
  it('is off unless CONSOLE_ENABLED=true', async () => {
    const t = await buildTestApp('pglite', PRODUCTION);
    try {
      for (const url of ['/console', '/console/', '/console/api/settings', '/console/api/outbox']) {
        assert.equal((await t.app.inject({ url, headers: basic(ADMIN_SECRET) })).statusCode, 404, url);
      }
    } finally {
      await t.close();
    }
  });

  it('refuses to start with CONSOLE_ENABLED=true and no admin secret', () => {
    assert.throws(
      () => configFrom({ ...PRODUCTION, CONSOLE_ENABLED: true }),
      /CONSOLE_ENABLED=true in production needs HASURA_GRAPHQL_ADMIN_SECRET/,
    );
  });

  describe('with CONSOLE_ENABLED=true', () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp('pglite', {
        ...PRODUCTION,
        CONSOLE_ENABLED: true,
        HASURA_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
        RATE_LIMIT_IP_FAILURES_MAX: 5,
      });
    });
    after(() => t.close());

    it('asks for the admin secret by HTTP Basic before serving anything', async () => {
      for (const url of ['/console/', '/console/main.js', '/console/api/settings']) {
        const res = await t.app.inject({ url });
        assert.equal(res.statusCode, 401, url);
        assert.match(String(res.headers['www-authenticate']), /^Basic realm="Gatehouse console"/);
        assert.doesNotMatch(res.body, /<html|import /);
      }
      const wrong = await t.app.inject({ url: '/console/', headers: basic('not-the-secret') });
      assert.equal(wrong.statusCode, 401);
      const right = await t.app.inject({ url: '/console/', headers: basic(ADMIN_SECRET, 'anyone') });
      assert.equal(right.statusCode, 200);
      assert.match(right.body, /<title>Gatehouse console<\/title>/);
    });

    it('reads the signed-in person from the session cookie, not from the Basic credential it asked for', async () => {
      const r = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: 'prod-console@example.com', password: 'pw-123456-long', cookie: true },
      });
      assert.equal(r.statusCode, 200, r.body);
      const access = setCookies(r)['permission_variables']?.value as string;
      const res = await t.app.inject({
        url: '/console/api/me',
        headers: { ...basic(ADMIN_SECRET), cookie: `permission_variables=${access}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().mfa, false);
    });

    it('never serves the development outbox', async () => {
      const res = await t.app.inject({ url: '/console/api/outbox', headers: basic(ADMIN_SECRET) });
      assert.equal(res.statusCode, 404);
    });

    it('limits guesses at the secret like a wrong x-admin-secret', async () => {
      const from = { remoteAddress: '203.0.113.9' };
      let last = 0;
      for (let i = 0; i < 8; i++) {
        last = (await t.app.inject({ url: '/console/', headers: basic(`guess-${i}`), ...from })).statusCode;
      }
      assert.equal(last, 429);
      const right = await t.app.inject({ url: '/console/', headers: basic(ADMIN_SECRET), ...from });
      assert.equal(right.statusCode, 429, 'the address that guessed waits, even with the right secret');
    });
  });
});
