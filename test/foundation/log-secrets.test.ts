/**
 * No secret reaches a log line, at any level. Every flow that carries one runs against the real app
 * (real SMTP in the process, both databases) with the service's own logger capturing at `trace`:
 * registration, activation, password login (body and cookie), refresh by query and by cookie, logout,
 * magic link, password change and reset, email change, MFA enrolment and sign-in, multipart uploads
 * (whose parser logs the request's headers at trace) by bearer token and by cookie, a file token download,
 * the admin secret (right and wrong), wrong credentials, and an unhandled error whose object carries the
 * request's headers and body the way HTTP client libraries' errors do. Then the captured output is
 * searched for every secret value the test saw: passwords, access and refresh tokens, cookies, tickets,
 * magic-link and file tokens, the MFA secret and codes, the admin secret. Zero hits.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, HS, setCookies } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { type CapturedLog, captureLog } from '../helpers/log.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { findLink, startSmtp, type TestSmtp } from '../helpers/smtp.ts';
import { authenticatorCode } from '../mfa/helpers.ts';

const ADMIN = 'admin-secret-that-must-never-be-logged-0123';
const pathOf = (u: URL) => u.pathname + u.search;

for (const kind of dbKinds()) {
  describe(`no secret in any log line, at trace level [${kind}]`, () => {
    let t: TestApp;
    let smtp: TestSmtp;
    let capture: CapturedLog;
    /** Every secret value the test saw, with what it is. */
    const secrets = new Map<string, string>();
    const keep = (what: string, value: unknown) => {
      assert.ok(typeof value === 'string' && value.length > 0, `${what}: no value (${String(value)})`);
      secrets.set(value, what);
      return value;
    };
    const refreshIn = (location: string | undefined) =>
      new URL(String(location)).searchParams.get('refresh_token');

    before(async () => {
      smtp = await startSmtp();
      capture = captureLog('trace');
      t = await buildTestApp(
        kind,
        {
          ...HS,
          SERVER_URL: 'http://gatehouse.test',
          SMTP_HOST: '127.0.0.1',
          SMTP_PORT: smtp.port,
          SMTP_SENDER: 'Gatehouse <no-reply@gatehouse.test>',
          RATE_LIMIT_ENABLED: false,
          AUTO_ACTIVATE_NEW_USERS: false,
          MAGIC_LINK_ENABLED: true,
          LOST_PASSWORD_ENABLED: true,
          VERIFY_EMAILS: true,
          MFA_ENABLED: true,
          HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
          REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
          REDIRECT_URL_ERROR: 'http://app.test/failed',
        },
        {
          log: capture.log,
          beforeReady(app) {
            // An error that carries what was sent, as HTTP client libraries' errors do (axios: config,
            // request, response; others: headers, body, options), with a URL in its message.
            app.post('/test/explode', async (request) => {
              const err = new Error(
                `upstream refused https://idp.test/token?code=${request.headers['x-code']}&client_secret=${request.headers['x-code']}`,
              );
              throw Object.assign(err, {
                config: { headers: request.headers, data: request.body },
                headers: request.headers,
                body: request.body,
                options: { auth: request.headers.authorization },
              });
            });
          },
        },
      );
      keep('admin secret', ADMIN);
    });
    after(async () => {
      await t?.close();
      await smtp?.stop();
    });

    it('drives every flow that carries a secret', async () => {
      const inject = t.app.inject.bind(t.app);
      const email = `logs-${kind}@example.com`;
      const password = keep('password at registration', 'Register-pass-word-7319');

      // Registration (no tokens: activation first) and activation by the emailed ticket.
      const reg = await inject({ method: 'POST', url: '/auth/register', payload: { email, password } });
      assert.equal(reg.statusCode, 200, reg.body);
      await t.ctx.tasks.idle();
      const activation = findLink(smtp.last(email).text, '/auth/activate');
      keep('activation ticket', activation.searchParams.get('ticket'));
      const activated = await inject({ method: 'GET', url: pathOf(activation) });
      assert.equal(activated.statusCode, 302, activated.body);
      const fromActivation = refreshIn(activated.headers.location);
      if (fromActivation) keep('refresh token (activation redirect)', fromActivation);
      for (const c of Object.values(setCookies(activated))) keep('cookie (activation)', c.value);

      // A wrong password, then a login with the body's tokens, then one with cookies.
      keep('wrong password', 'Wrong-pass-word-5521');
      assert.equal(
        (
          await inject({
            method: 'POST',
            url: '/auth/login',
            payload: { email, password: 'Wrong-pass-word-5521' },
          })
        ).statusCode,
        401,
      );
      const login = await inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email, password, cookie: false },
      });
      assert.equal(login.statusCode, 200, login.body);
      const jwt = keep('access token', login.json().jwt_token);
      const refresh = keep('refresh token', login.json().refresh_token);
      const withCookie = await inject({ method: 'POST', url: '/auth/login', payload: { email, password } });
      assert.equal(withCookie.statusCode, 200, withCookie.body);
      const cookies = setCookies(withCookie);
      for (const [name, c] of Object.entries(cookies)) keep(`cookie ${name}`, c.value);
      const refreshCookie = Object.entries(cookies).find(([name]) => /refresh/.test(name));
      assert.ok(refreshCookie, 'a refresh cookie');

      // Multipart uploads, one signed in by a bearer token (with a cookie beside it) and one by the
      // cookies alone: at trace level @fastify/multipart logs its busboy options, which hold the
      // request's headers.
      const userId = reg.json().user.id as string;
      const cookieHeader = Object.entries(cookies)
        .map(([name, c]) => `${name}=${c.value}`)
        .join('; ');
      for (const [name, headers] of [
        ['by-bearer', { ...bearer(jwt), cookie: `${refreshCookie[0]}=${refreshCookie[1].value}` }],
        ['by-cookie', { cookie: cookieHeader, origin: 'http://gatehouse.test' }],
      ] as const) {
        const form = multipartBody([
          { name: 'file', filename: `${name}.txt`, type: 'text/plain', data: name },
        ]);
        const upload = await inject({
          method: 'POST',
          url: `/storage/o/user/${userId}/${name}.txt`,
          headers: { ...form.headers, ...headers },
          payload: form.payload,
        });
        assert.equal(upload.statusCode, 200, `${name}: ${upload.body}`);
      }
      assert.equal(capture.matching(/Providing options to busboy/).length, 2, 'the plugin logged both');

      // Refresh by query, by cookie, and with a forged token in the query.
      const byQuery = await inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refresh}` });
      assert.equal(byQuery.statusCode, 200, byQuery.body);
      keep('access token (refresh)', byQuery.json().jwt_token);
      const rotated = keep('refresh token (rotated)', byQuery.json().refresh_token);
      const byCookie = await inject({
        method: 'GET',
        url: '/auth/token/refresh',
        headers: { cookie: `${refreshCookie[0]}=${refreshCookie[1].value}` },
      });
      assert.equal(byCookie.statusCode, 200, byCookie.body);
      for (const c of Object.values(setCookies(byCookie))) keep('cookie (refresh)', c.value);
      keep('forged refresh token', 'forged-refresh-token-aaaabbbbccccdddd');
      assert.equal(
        (
          await inject({
            method: 'GET',
            url: '/auth/token/refresh?refresh_token=forged-refresh-token-aaaabbbbccccdddd',
          })
        ).statusCode,
        401,
      );

      // Password change with the old password.
      const changed = keep('new password (change)', 'Changed-pass-word-8842');
      const change = await inject({
        method: 'POST',
        url: '/auth/change-password',
        headers: bearer(jwt),
        payload: { old_password: password, new_password: changed },
      });
      assert.equal(change.statusCode, 204, change.body);

      // Magic link sign-in.
      const magic = await inject({ method: 'POST', url: '/auth/login', payload: { email } });
      assert.equal(magic.statusCode, 200, magic.body);
      await t.ctx.tasks.idle();
      const magicLink = findLink(smtp.last(email).text, '/auth/magic-link');
      keep('magic-link token', magicLink.searchParams.get('token'));
      const followed = await inject({ method: 'GET', url: pathOf(magicLink) });
      assert.equal(followed.statusCode, 302, followed.body);
      keep('refresh token (magic link)', refreshIn(followed.headers.location));
      for (const c of Object.values(setCookies(followed))) keep('cookie (magic link)', c.value);

      // Password reset by the emailed ticket.
      assert.equal(
        (await inject({ method: 'POST', url: '/auth/change-password/request', payload: { email } }))
          .statusCode,
        204,
      );
      await t.ctx.tasks.idle();
      const resetTicket = keep('reset ticket', smtp.last(email).headers.get('x-ticket'));
      const reset = keep('new password (reset)', 'Reset-pass-word-2291');
      const resetDone = await inject({
        method: 'POST',
        url: '/auth/change-password/change',
        payload: { ticket: resetTicket, new_password: reset },
      });
      assert.equal(resetDone.statusCode, 204, resetDone.body);

      // Email change by the ticket mailed to the new address, after a fresh sign-in.
      const again = await inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email, password: reset, cookie: false },
      });
      assert.equal(again.statusCode, 200, again.body);
      const jwt2 = keep('access token (after reset)', again.json().jwt_token);
      keep('refresh token (after reset)', again.json().refresh_token);
      const moved = `moved-${kind}@example.com`;
      const ask = await inject({
        method: 'POST',
        url: '/auth/change-email/request',
        headers: bearer(jwt2),
        payload: { new_email: moved },
      });
      assert.equal(ask.statusCode, 204, ask.body);
      await t.ctx.tasks.idle();
      const emailTicket = keep('email-change ticket', smtp.last(moved).headers.get('x-ticket'));
      const switched = await inject({
        method: 'POST',
        url: '/auth/change-email/change',
        payload: { ticket: emailTicket },
      });
      assert.equal(switched.statusCode, 204, switched.body);

      // MFA: enrol (the secret and its QR image), enable with a code, sign in with ticket and code.
      const signed = await inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: moved, password: reset, cookie: false },
      });
      const jwt3 = keep('access token (before MFA)', signed.json().jwt_token);
      keep('refresh token (before MFA)', signed.json().refresh_token);
      const gen = await inject({ method: 'POST', url: '/auth/mfa/generate', headers: bearer(jwt3) });
      assert.equal(gen.statusCode, 200, gen.body);
      const otpSecret = keep('MFA secret', gen.json().otp_secret);
      if (gen.json().image_url) keep('MFA QR image', gen.json().image_url);
      const enableCode = keep('MFA code (enable)', authenticatorCode(otpSecret, t.clock.now().getTime()));
      const enable = await inject({
        method: 'POST',
        url: '/auth/mfa/enable',
        headers: bearer(jwt3),
        payload: { code: enableCode },
      });
      assert.equal(enable.statusCode, 204, enable.body);
      const first = await inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: moved, password: reset, cookie: false },
      });
      assert.equal(first.statusCode, 200, first.body);
      const mfaTicket = keep('MFA ticket', first.json().ticket);
      t.clock.advance(30_000);
      const loginCode = keep('MFA code (sign-in)', authenticatorCode(otpSecret, t.clock.now().getTime()));
      const totp = await inject({
        method: 'POST',
        url: '/auth/mfa/totp',
        payload: { ticket: mfaTicket, code: loginCode, cookie: false },
      });
      assert.equal(totp.statusCode, 200, totp.body);
      const jwt4 = keep('access token (MFA)', totp.json().jwt_token);
      keep('refresh token (MFA)', totp.json().refresh_token);

      // A file, downloaded anonymously with its token; the admin secret, right and wrong.
      const up = await inject({
        method: 'POST',
        url: `/storage/o/user/${userId}/notes.txt`,
        headers: { ...bearer(jwt4), 'content-type': 'text/plain' },
        payload: 'private notes',
      });
      assert.equal(up.statusCode, 200, up.body);
      const fileToken = keep('file token', up.json().Metadata.token);
      const download = await inject({
        method: 'GET',
        url: `/storage/o/user/${userId}/notes.txt?token=${fileToken}`,
      });
      assert.equal(download.statusCode, 200, download.body);
      const asAdmin = await inject({
        method: 'GET',
        url: `/storage/m/user/${userId}/notes.txt`,
        headers: { 'x-admin-secret': ADMIN },
      });
      assert.equal(asAdmin.statusCode, 200, asAdmin.body);
      const revoked = await inject({
        method: 'POST',
        url: `/storage/m/user/${userId}/notes.txt`,
        headers: { 'x-admin-secret': ADMIN },
        payload: { action: 'revoke-token' },
      });
      assert.equal(revoked.statusCode, 200, revoked.body);
      keep('file token (revoked and renewed)', revoked.json().Metadata?.token ?? revoked.json().token);
      keep('wrong admin secret', 'wrong-admin-secret-guess-4471');
      const wrong = await inject({
        method: 'GET',
        url: `/storage/m/user/${userId}/notes.txt`,
        headers: { 'x-admin-secret': 'wrong-admin-secret-guess-4471' },
      });
      assert.equal(wrong.statusCode, 403);

      // Logout by query; an unhandled error whose object holds the request's headers and body.
      const out = await inject({ method: 'POST', url: `/auth/logout?refresh_token=${rotated}` });
      assert.ok(out.statusCode < 300, out.body);
      keep('code in an upstream URL', 'upstream-oauth-code-6610');
      const boom = await inject({
        method: 'POST',
        url: '/test/explode',
        headers: {
          ...bearer(jwt4),
          cookie: `${refreshCookie[0]}=${refreshCookie[1].value}`,
          'x-code': 'upstream-oauth-code-6610',
        },
        payload: { password: reset, ticket: emailTicket },
      });
      assert.equal(boom.statusCode, 500);
    });

    it('logged the requests, at trace level, with the secret query values replaced', () => {
      const requests = capture.lines.filter((l) => (l['req'] as { url?: string } | undefined)?.url);
      const urls = requests.map((l) => (l['req'] as { url: string }).url);
      assert.ok(requests.length >= 25, `only ${requests.length} request lines were captured`);
      assert.equal(capture.log.level, 'trace');
      assert.ok(urls.includes('/auth/token/refresh?refresh_token=[redacted]'), urls.join('\n'));
      assert.ok(
        urls.some((u) => /^\/auth\/activate\?ticket=\[redacted\]/.test(u)),
        urls.join('\n'),
      );
      assert.ok(
        urls.some((u) => /^\/auth\/magic-link\?.*token=\[redacted\]/.test(u)),
        urls.join('\n'),
      );
      assert.ok(
        urls.some((u) => /\/notes\.txt\?token=\[redacted\]$/.test(u)),
        urls.join('\n'),
      );
      assert.ok(capture.matching(/unhandled error/).length === 1, 'the unhandled error was logged');
    });

    it('holds none of the secret values it saw, anywhere in the output', () => {
      const text = capture.text();
      assert.ok(secrets.size >= 30, `only ${secrets.size} secrets were seen`);
      const found: string[] = [];
      for (const [value, what] of secrets) {
        const forms = new Set([value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1)]);
        for (const form of forms) {
          // A six-digit code is searched as a whole number, not inside a timestamp or a duration.
          const hit = /^\d{1,8}$/.test(form)
            ? new RegExp(`(?<![\\d.])${form}(?![\\d.])`).test(text)
            : text.includes(form);
          if (hit) found.push(`${what}: ${form.slice(0, 12)}…`);
        }
      }
      assert.deepEqual(found, []);
    });
  });
}
