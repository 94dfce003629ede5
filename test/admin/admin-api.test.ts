/**
 * The admin API (`/admin`), on PGlite and PostgreSQL: every route with the admin secret and with an
 * access token whose roles include ADMIN_ROLE; refused to a plain user's token (403 ADMIN_REQUIRED), to a
 * caller without a credential (401) and to a wrong secret (401, counted as a guess: throttled with 429
 * after RATE_LIMIT_LOGIN_ACCOUNT_MAX); inputs checked like the public routes' (400, 404, never 500); and
 * a user disabled through it is refused at once on a signed-in route with the access token it holds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { configFrom } from '../../src/config.ts';
import { bearer, login, newEmail, signUp } from '../auth/helpers.ts';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

const SECRET = 'an-admin-secret-of-at-least-32-characters';
const PASSWORD = 'correct horse battery staple';
const SETTINGS = {
  ...HS,
  HASURA_GRAPHQL_ADMIN_SECRET: SECRET,
  ADMIN_ROLE: 'admin',
  LOST_PASSWORD_ENABLED: true,
  MAGIC_LINK_ENABLED: true,
  AUTO_ACTIVATE_NEW_USERS: true,
  SERVER_URL: 'http://gatehouse.test',
} as const;

type Headers = Record<string, string>;
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

function call(t: TestApp, method: Method, url: string, headers: Headers, payload?: unknown) {
  return t.app.inject({ method, url, headers, payload: payload as never });
}

function expectCode(res: LightMyRequestResponse, status: number, code: string): void {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json();
  assert.equal(body.code, code, res.body);
  assert.equal(typeof body.message, 'string');
}

/** An access token that may call the admin API: an account given ADMIN_ROLE with the secret, signed in. */
async function adminToken(t: TestApp): Promise<{ jwt: string; userId: string; email: string }> {
  const email = newEmail('admin');
  const made = await call(
    t,
    'POST',
    '/admin/users',
    { 'x-hasura-admin-secret': SECRET },
    { email, password: PASSWORD, roles: ['user', 'admin'], default_role: 'user', active: true },
  );
  assert.equal(made.statusCode, 201, made.body);
  const res = await login(t, { email, password: PASSWORD, cookie: false });
  assert.equal(res.statusCode, 200, res.body);
  return { jwt: res.json().jwt_token, userId: made.json().id, email };
}

/** Every route of the API, with a valid-looking input, for the refusal cases. */
const ROUTES = (id: string): [Method, string, unknown?][] => [
  ['GET', '/admin/users'],
  ['GET', `/admin/users/${id}`],
  ['POST', '/admin/users', { email: newEmail('refused') }],
  ['PATCH', `/admin/users/${id}`, { disabled: true }],
  ['DELETE', `/admin/users/${id}`],
  ['POST', `/admin/users/${id}/sign-out`],
  ['POST', `/admin/users/${id}/links`, { type: 'password-reset' }],
  ['GET', `/admin/users/${id}/sessions`],
  ['GET', `/admin/users/${id}/security-events`],
  ['GET', '/admin/emails'],
  ['GET', '/admin/webhooks/failed'],
];

for (const kind of dbKinds()) {
  describe(`the admin API [${kind}]`, () => {
    let t: TestApp;
    let asRole: Headers;
    let adminId: string;
    before(async () => {
      t = await buildTestApp(kind, { ...SETTINGS, RATE_LIMIT_ENABLED: false });
      const admin = await adminToken(t);
      asRole = bearer(admin.jwt);
      adminId = admin.userId;
    });
    after(() => t.close());

    const credentials = (): [string, () => Headers, () => object][] => [
      ['the admin secret', () => ({ 'x-hasura-admin-secret': SECRET }), () => ({ via: 'admin-secret' })],
      ['an ADMIN_ROLE access token', () => asRole, () => ({ via: 'admin-role', user_id: adminId })],
    ];

    for (const [name, headersOf, byOf] of credentials()) {
      it(`serves every route with ${name}: create, find, open, roles, links, sessions, sign-out, disable, delete`, async () => {
        const h = headersOf();
        const email = newEmail('managed');
        // Create, active, with a password that then signs in.
        const made = await call(t, 'POST', '/admin/users', h, {
          email,
          password: PASSWORD,
          display_name: 'Managed Person',
          active: true,
        });
        assert.equal(made.statusCode, 201, made.body);
        const user = made.json();
        assert.equal(user.email, email);
        assert.equal(user.display_name, 'Managed Person');
        assert.equal(user.active, true);
        assert.equal(user.email_verified, true, 'the operator vouches for the address');
        assert.deepEqual(user.roles, ['user']);
        const signedIn = await login(t, { email, password: PASSWORD, cookie: false });
        assert.equal(signedIn.statusCode, 200, signedIn.body);
        const userJwt = signedIn.json().jwt_token as string;

        // Find by (part of) the email; page through everyone with an opaque cursor.
        const found = await call(t, 'GET', `/admin/users?email=${encodeURIComponent(email.slice(0, 20))}`, h);
        assert.equal(found.statusCode, 200, found.body);
        assert.deepEqual(
          found.json().users.map((u: { id: string }) => u.id),
          [user.id],
        );
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const url: string = `/admin/users?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
          const page = await call(t, 'GET', url, h);
          assert.equal(page.statusCode, 200, page.body);
          assert.ok(page.json().users.length <= 1);
          seen.push(...page.json().users.map((u: { id: string }) => u.id));
          cursor = page.json().next_cursor;
        } while (cursor !== null);
        assert.equal(new Set(seen).size, seen.length, 'no user twice across pages');
        assert.ok(seen.includes(user.id));

        // Open: state, providers, MFA, sessions.
        const open = await call(t, 'GET', `/admin/users/${user.id}`, h);
        assert.equal(open.statusCode, 200, open.body);
        assert.equal(open.json().mfa_enabled, false);
        assert.deepEqual(open.json().providers, []);
        assert.equal(open.json().sessions.length, 1);
        const sessions = await call(t, 'GET', `/admin/users/${user.id}/sessions`, h);
        assert.equal(sessions.statusCode, 200, sessions.body);
        assert.equal(sessions.json()[0].sign_in_method, 'password');

        // Roles: adding one keeps the sessions; the claims change at the next refresh.
        const roles = await call(t, 'PATCH', `/admin/users/${user.id}`, h, { roles: ['user', 'editor'] });
        assert.equal(roles.statusCode, 400, 'editor is not in auth.roles');
        assert.equal(roles.json().code, 'UNKNOWN_ROLE');
        const renamed = await call(t, 'PATCH', `/admin/users/${user.id}`, h, {
          display_name: 'Renamed',
          email_verified: false,
        });
        assert.equal(renamed.statusCode, 200, renamed.body);
        assert.equal(renamed.json().display_name, 'Renamed');
        assert.equal(renamed.json().email_verified, false);

        // Links: each type, shown (not sent) or sent; refusals say why.
        const reset = await call(t, 'POST', `/admin/users/${user.id}/links`, h, { type: 'password-reset' });
        assert.equal(reset.statusCode, 200, reset.body);
        assert.match(reset.json().url, /[?&]ticket=[0-9a-f-]{36}&type=password-reset/);
        assert.equal(reset.json().sent, false);
        const ticket = new URL(reset.json().url).searchParams.get('ticket');
        const used = await t.app.inject({
          method: 'POST',
          url: '/auth/change-password/change',
          payload: { ticket, new_password: 'a brand new passphrase' },
        });
        assert.equal(used.statusCode, 204, `the reset link works: ${used.body}`);
        const magic = await call(t, 'POST', `/admin/users/${user.id}/links`, h, {
          type: 'magic-link',
          send: true,
        });
        assert.equal(magic.statusCode, 200, magic.body);
        assert.match(magic.json().url, /^http:\/\/gatehouse\.test\/auth\/magic-link\?action=log-in&token=/);
        assert.equal(magic.json().sent, true);
        const emails = await call(t, 'GET', '/admin/emails', h);
        assert.equal(emails.statusCode, 200, emails.body);
        const mail = emails.json().find((e: { recipient: string }) => e.recipient === email);
        assert.equal(mail?.template, 'magic-link', emails.body);
        assert.ok(!emails.body.includes(new URL(magic.json().url).searchParams.get('token') as string));
        const activation = await call(t, 'POST', `/admin/users/${user.id}/links`, h, { type: 'activation' });
        expectCode(activation, 409, 'LINK_NOT_AVAILABLE');

        // Sign out everywhere: the user's access token is refused at once.
        const again = await login(t, { email, password: 'a brand new passphrase', cookie: false });
        assert.equal(again.statusCode, 200, again.body);
        const out = await call(t, 'POST', `/admin/users/${user.id}/sign-out`, h);
        assert.equal(out.statusCode, 200, out.body);
        assert.equal(out.json().sessions_ended, 1);
        const stale = await t.app.inject({
          method: 'GET',
          url: '/auth/sessions',
          headers: bearer(again.json().jwt_token),
        });
        assert.equal(stale.statusCode, 401, stale.body);
        assert.ok(userJwt);

        // Disable, then enable.
        const off = await call(t, 'PATCH', `/admin/users/${user.id}`, h, { disabled: true });
        assert.equal(off.statusCode, 200, off.body);
        assert.equal(off.json().disabled, true);
        const refused = await login(t, { email, password: 'a brand new passphrase', cookie: false });
        assert.equal(refused.statusCode, 403, refused.body);
        expectCode(
          await call(t, 'POST', `/admin/users/${user.id}/links`, h, { type: 'magic-link' }),
          409,
          'LINK_NOT_AVAILABLE',
        );
        const on = await call(t, 'PATCH', `/admin/users/${user.id}`, h, { disabled: false });
        assert.equal(on.json().disabled, false);
        assert.equal(
          (await login(t, { email, password: 'a brand new passphrase', cookie: false })).statusCode,
          200,
        );

        // Every change is in the user's security feed, with the credential that made it; no link in it.
        const feed = await call(t, 'GET', `/admin/users/${user.id}/security-events?limit=100`, h);
        assert.equal(feed.statusCode, 200, feed.body);
        const events = feed.json() as { type: string; details: { by?: object }; ip: string | null }[];
        const adminEvents = events.filter((e) => e.type.startsWith('admin_'));
        // (The test clock stands still, so the events share one time: compared as a set.)
        assert.deepEqual(
          adminEvents.map((e) => e.type).sort(),
          [
            'admin_account_disabled',
            'admin_account_enabled',
            'admin_email_verification_changed',
            'admin_link_issued',
            'admin_link_issued',
            'admin_profile_changed',
            'admin_signed_out',
            'admin_user_created',
          ],
          feed.body,
        );
        for (const e of adminEvents) {
          assert.deepEqual(e.details.by, byOf(), feed.body);
          assert.equal(e.ip, null, "the operator's address is not put in the user's feed");
        }
        assert.ok(!feed.body.includes(ticket as string), 'no link in the feed');
        assert.ok(
          events.some((e) => e.type === 'sign_in'),
          'the user’s own events are there too',
        );
        expectCode(
          await call(t, 'GET', `/admin/users/${user.id}/security-events?before=not-an-event`, h),
          400,
          'VALIDATION',
        );

        // Delete: gone, and 404 after.
        const gone = await call(t, 'DELETE', `/admin/users/${user.id}`, h);
        assert.equal(gone.statusCode, 204, gone.body);
        expectCode(await call(t, 'GET', `/admin/users/${user.id}`, h), 404, 'USER_NOT_FOUND');
        expectCode(await call(t, 'DELETE', `/admin/users/${user.id}`, h), 404, 'USER_NOT_FOUND');
      });
    }

    it('a user disabled through the API is refused at once with the access token it holds (401)', async () => {
      const victim = await signUp(t);
      const before = await t.app.inject({
        method: 'GET',
        url: '/auth/sessions',
        headers: bearer(victim.jwt),
      });
      assert.equal(before.statusCode, 200, before.body);
      const off = await call(
        t,
        'PATCH',
        `/admin/users/${victim.userId}`,
        { 'x-hasura-admin-secret': SECRET },
        { disabled: true },
      );
      assert.equal(off.statusCode, 200, off.body);
      // No waiting: the instance that disabled the account refuses its tokens from the commit on.
      const after = await t.app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(victim.jwt) });
      expectCode(after, 401, 'UNAUTHENTICATED');
      const refresh = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${encodeURIComponent(victim.refreshToken)}`,
      });
      assert.equal(refresh.statusCode, 401, refresh.body);
    });

    it('an admin whose admin role is taken away loses the admin API at once', async () => {
      const other = await adminToken(t);
      const list = await call(t, 'GET', '/admin/users?limit=1', bearer(other.jwt));
      assert.equal(list.statusCode, 200, list.body);
      const demoted = await call(
        t,
        'PATCH',
        `/admin/users/${other.userId}`,
        { 'x-hasura-admin-secret': SECRET },
        { roles: ['user'] },
      );
      assert.equal(demoted.statusCode, 200, demoted.body);
      assert.deepEqual(demoted.json().roles, ['user']);
      expectCode(await call(t, 'GET', '/admin/users?limit=1', bearer(other.jwt)), 401, 'UNAUTHENTICATED');
      const back = await login(t, { email: other.email, password: PASSWORD, cookie: false });
      expectCode(
        await call(t, 'GET', '/admin/users?limit=1', bearer(back.json().jwt_token)),
        403,
        'ADMIN_REQUIRED',
      );
    });

    it('an invited account keeps the roles the operator gave it when its activation link is followed', async () => {
      const email = newEmail('invited');
      const made = await call(
        t,
        'POST',
        '/admin/users',
        { 'x-hasura-admin-secret': SECRET },
        { email, roles: ['user', 'admin'], default_role: 'user' },
      );
      assert.equal(made.statusCode, 201, made.body);
      assert.equal(made.json().active, false);
      const link = await call(
        t,
        'POST',
        `/admin/users/${made.json().id}/links`,
        { 'x-hasura-admin-secret': SECRET },
        { type: 'activation' },
      );
      assert.equal(link.statusCode, 200, link.body);
      const url = new URL(link.json().url);
      const followed = await t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
      assert.equal(followed.statusCode, 302, followed.body);
      const now = await call(t, 'GET', `/admin/users/${made.json().id}`, { 'x-hasura-admin-secret': SECRET });
      assert.equal(now.json().active, true);
      assert.deepEqual(now.json().roles, ['user', 'admin']);
    });

    it('send_invite emails the activation link of a new pending account (the outbox shows it, never the link)', async () => {
      const email = newEmail('invitee');
      const made = await call(
        t,
        'POST',
        '/admin/users',
        { 'x-hasura-admin-secret': SECRET },
        { email, send_invite: true, display_name: 'Invitee' },
      );
      assert.equal(made.statusCode, 201, made.body);
      assert.equal(made.json().active, false);
      const emails = await call(t, 'GET', '/admin/emails?limit=200', { 'x-hasura-admin-secret': SECRET });
      const invite = emails.json().find((e: { recipient: string }) => e.recipient === email);
      assert.equal(invite?.template, 'activate-account', emails.body);
      const feed = await call(t, 'GET', `/admin/users/${made.json().id}/security-events`, {
        'x-hasura-admin-secret': SECRET,
      });
      assert.deepEqual(feed.json()[0].details, { by: { via: 'admin-secret' }, active: false, invited: true });
    });

    it('lets a back office on an allowed origin call it: PATCH and x-hasura-admin-secret pass the CORS preflight', async () => {
      const res = await t.app.inject({
        method: 'OPTIONS',
        url: '/admin/users/00000000-0000-4000-8000-000000000000',
        headers: {
          origin: 'http://localhost:5173',
          'access-control-request-method': 'PATCH',
          'access-control-request-headers': 'x-hasura-admin-secret, content-type',
        },
      });
      assert.equal(res.statusCode, 204, res.body);
      assert.match(String(res.headers['access-control-allow-methods']), /PATCH/);
      assert.match(String(res.headers['access-control-allow-headers']), /x-hasura-admin-secret/);
    });

    it('refuses every route to a plain user token (403 ADMIN_REQUIRED) and without a credential (401)', async () => {
      const plain = await signUp(t);
      for (const [method, url, body] of ROUTES(plain.userId)) {
        expectCode(await call(t, method, url, bearer(plain.jwt), body), 403, 'ADMIN_REQUIRED');
        expectCode(await call(t, method, url, {}, body), 401, 'UNAUTHENTICATED');
        expectCode(
          await call(t, method, url, { 'x-hasura-admin-secret': `${SECRET}x` }, body),
          401,
          'INVALID_ADMIN_SECRET',
        );
      }
      // Nothing changed: the account is still there and enabled.
      const still = await call(t, 'GET', `/admin/users/${plain.userId}`, { 'x-admin-secret': SECRET });
      assert.equal(still.statusCode, 200, still.body);
      assert.equal(still.json().disabled, false);
    });

    it('checks inputs like the public routes: 400 for a malformed id, cursor, limit or body; 404 for an unknown id', async () => {
      const h = { 'x-hasura-admin-secret': SECRET };
      expectCode(await call(t, 'GET', '/admin/users/not-a-uuid', h), 400, 'VALIDATION');
      expectCode(await call(t, 'PATCH', '/admin/users/123', h, { disabled: true }), 400, 'VALIDATION');
      expectCode(
        await call(t, 'GET', '/admin/users/00000000-0000-4000-8000-000000000000', h),
        404,
        'USER_NOT_FOUND',
      );
      expectCode(
        await call(t, 'POST', '/admin/users/00000000-0000-4000-8000-000000000000/sign-out', h),
        404,
        'USER_NOT_FOUND',
      );
      for (const q of ['limit=0', 'limit=101', 'limit=x', 'cursor=', 'unknown=1'])
        expectCode(await call(t, 'GET', `/admin/users?${q}`, h), 400, 'VALIDATION');
      for (const cursor of [
        'garbage',
        Buffer.from('["2026-01-01 00:00:00+00","not-a-uuid"]').toString('base64url'),
        Buffer.from('["2026-13-45 99:00:00+00","00000000-0000-4000-8000-000000000000"]').toString(
          'base64url',
        ),
        Buffer.from('{"a":1}').toString('base64url'),
        // Times JavaScript's Date.parse takes and PostgreSQL refuses: a 400, never a database error.
        ...[
          '2026-02-30 00:00:00+00',
          '0000-01-01 00:00:00+00',
          '2026-01-01 25:00:00+00',
          '2026-01-01 00:00:00+16',
          '99999-01-01 00:00:00+00',
        ].map((time) =>
          Buffer.from(JSON.stringify([time, '00000000-0000-4000-8000-000000000000'])).toString('base64url'),
        ),
      ])
        expectCode(
          await call(t, 'GET', `/admin/users?cursor=${encodeURIComponent(cursor)}`, h),
          400,
          'VALIDATION',
        );
      const plain = await signUp(t);
      for (const body of [
        {},
        { disabled: 'yes' },
        { roles: 'user' },
        { email: 'not an email' },
        { other: 1 },
      ])
        expectCode(await call(t, 'PATCH', `/admin/users/${plain.userId}`, h, body), 400, 'VALIDATION');
      for (const body of [{}, { type: 'other' }])
        expectCode(await call(t, 'POST', `/admin/users/${plain.userId}/links`, h, body), 400, 'VALIDATION');
      expectCode(await call(t, 'POST', '/admin/users', h, { email: plain.email }), 400, 'ACCOUNT_EXISTS');
      expectCode(
        await call(t, 'POST', '/admin/users', h, { email: newEmail(), password: 'short' }),
        400,
        'VALIDATION',
      );
      expectCode(
        await call(t, 'POST', '/admin/users', h, { email: newEmail(), active: true, send_invite: true }),
        400,
        'VALIDATION',
      );
      const other = await signUp(t);
      expectCode(
        await call(t, 'PATCH', `/admin/users/${plain.userId}`, h, { email: other.email }),
        400,
        'ACCOUNT_EXISTS',
      );
    });

    it('lists every admin route in /openapi.json under the tag "admin", with its credentials', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      const paths = Object.entries(
        doc.paths as Record<string, Record<string, { tags: string[]; security: object[] }>>,
      )
        .filter(([p]) => p.startsWith('/admin/'))
        .flatMap(([p, ops]) =>
          Object.entries(ops).map(([m, op]) => ({ route: `${m.toUpperCase()} ${p}`, op })),
        );
      assert.equal(paths.length, 11, paths.map((p) => p.route).join(', '));
      for (const { route, op } of paths) {
        assert.deepEqual(op.tags, ['admin'], route);
        assert.deepEqual(
          op.security,
          [{ hasuraAdminSecret: [] }, { adminSecret: [] }, { bearer: [] }],
          route,
        );
      }
    });
  });
}

describe('admin secret guesses on the admin API', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', {
      ...SETTINGS,
      RATE_LIMIT_LOGIN_ACCOUNT_MAX: 3,
      RATE_LIMIT_LOGIN_DELAY: 60_000,
    });
  });
  after(() => t.close());

  it('counts a wrong secret as a guess: after RATE_LIMIT_LOGIN_ACCOUNT_MAX, even the right one waits (429)', async () => {
    for (let i = 0; i < 3; i++)
      expectCode(
        await call(t, 'GET', '/admin/users', { 'x-hasura-admin-secret': `wrong-${i}` }),
        401,
        'INVALID_ADMIN_SECRET',
      );
    const throttled = await call(t, 'GET', '/admin/users', { 'x-hasura-admin-secret': SECRET });
    expectCode(throttled, 429, 'RATE_LIMITED');
    assert.ok(Number(throttled.headers['retry-after']) > 0);
    // The same budget as the storage bypass and impersonation: one secret, one count.
    const storage = await t.app.inject({
      method: 'GET',
      url: '/storage/m/user/x/file.txt',
      headers: { 'x-admin-secret': SECRET },
    });
    assert.equal(storage.statusCode, 429, storage.body);
  });
});

describe('ADMIN_ROLE', () => {
  it('refuses to start with a role every new account gets or may ask for', () => {
    for (const settings of [
      { ADMIN_ROLE: 'user' },
      { ADMIN_ROLE: 'admin', ALLOWED_USER_ROLES: ['user', 'admin'] },
      { ADMIN_ROLE: 'anonymous' },
    ])
      assert.throws(() => configFrom(settings), /ADMIN_ROLE/);
    assert.equal(configFrom({ ADMIN_ROLE: 'admin' }).ADMIN_ROLE, 'admin');
  });
});
