/**
 * `gatehouse users` against the service's database (embedded PGlite in DATA_DIR, and PostgreSQL through
 * DATABASE_URL), checked through the service's own routes. The real bin creates the first account and
 * gives the exit codes; the rest runs the same command in the test process (test/helpers/cli.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type CliInstallation, cliInstallation } from '../helpers/cli.ts';
import { dbKinds } from '../helpers/db.ts';

const PASSWORD = 'a long enough password';

type App = Parameters<Parameters<CliInstallation['withService']>[0]>[1];

const login = (app: App, email: string, password = PASSWORD) =>
  app.inject({ method: 'POST', url: '/auth/login', payload: { email, password, cookie: false } });
const refresh = (app: App, token: string) =>
  app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });
const claims = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1] as string, 'base64url').toString())[
    'https://hasura.io/jwt/claims'
  ];

/** One line, no stack trace. */
function assertPlainError(err: string, pattern: RegExp) {
  assert.match(err, pattern);
  assert.doesNotMatch(err, /\n\s+at /);
}

for (const kind of dbKinds()) {
  describe(`gatehouse users [${kind}]`, () => {
    let g: CliInstallation;
    before(async () => {
      g = await cliInstallation(kind, { MIN_PASSWORD_LENGTH: '12', LOST_PASSWORD_ENABLED: 'true' });
    });
    after(() => g?.close());

    it('creates an active account whose password (read from stdin) signs in, and lists it', async () => {
      // The real bin, the password on its standard input.
      const made = await g.bin(
        `${PASSWORD}\n`,
        'users',
        'create',
        'ada@example.com',
        '--password-stdin',
        '--active',
      );
      assert.equal(made.code, 0, made.err);
      const userId = made.out.trim();
      assert.match(userId, /^[0-9a-f-]{36}$/);
      const listed = await g.gatehouse('users', 'list', '--json');
      assert.equal(listed.code, 0, listed.err);
      const ada = (JSON.parse(listed.out) as { user_id: string; email: string; active: boolean }[]).find(
        (u) => u.email === 'ada@example.com',
      );
      assert.deepEqual(
        { ...ada, account_id: undefined, created_at: undefined },
        {
          user_id: userId,
          account_id: undefined,
          email: 'ada@example.com',
          display_name: 'ada@example.com',
          active: true,
          disabled_at: null,
          anonymous: false,
          mfa: false,
          default_role: 'user',
          roles: ['user'],
          created_at: undefined,
        },
      );
      const text = await g.gatehouse('users', 'list');
      assert.match(
        text.out,
        new RegExp(`^${userId} {2}ada@example\\.com {2}active {2}user \\[user\\]$`, 'm'),
      );
      await g.withService(async (_ctx, app) => {
        const res = await login(app, 'ada@example.com');
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(claims(res.json().jwt_token)['x-hasura-user-id'], userId);
      });
    });

    it('refuses a taken address, an unknown role, a short password and a missing email, with exit 1 or 2 and no stack trace', async () => {
      // The real bin: exit codes and streams as a script sees them.
      const taken = await g.bin('', 'users', 'create', 'ada@example.com', '--active');
      assert.equal(taken.code, 1);
      assertPlainError(taken.err, /^an account with the email "ada@example\.com" exists already\n$/);
      const role = await g.gatehouse('users', 'create', 'bob@example.com', '--roles', 'user,admin');
      assert.equal(role.code, 1);
      assertPlainError(role.err, /unknown role "admin"/);
      const short = await g.gatehouse('users', 'create', 'bob@example.com', '--password', 'short');
      assert.equal(short.code, 1);
      assertPlainError(short.err, /the password must be 12 to 128 characters long/);
      const none = await g.bin('', 'users', 'create');
      assert.equal(none.code, 2);
      assert.match(
        none.err,
        /^gatehouse users create: give the email address of the account\n\nUsage: gatehouse users create/,
      );
      const unknown = await g.gatehouse('users', 'disable', 'nobody@example.com');
      assert.equal(unknown.code, 1);
      assertPlainError(unknown.err, /^no account has the email "nobody@example\.com"\n$/);
    });

    it('a disabled account cannot sign in or refresh, its refresh tokens are revoked, and enable restores it', async () => {
      const refreshToken = await g.withService(async (_ctx, app) => {
        const res = await login(app, 'ada@example.com');
        assert.equal(res.statusCode, 200, res.body);
        return res.json().refresh_token as string;
      });
      const off = await g.gatehouse('users', 'disable', 'ada@example.com');
      assert.equal(off.code, 0, off.err);
      assert.match(off.err, /disabled ada@example\.com; [1-9]\d* session\(s\) ended/);
      await g.withService(async (ctx, app) => {
        const denied = await login(app, 'ada@example.com');
        assert.equal(denied.statusCode, 403);
        assert.equal(denied.json().code, 'ACCOUNT_DISABLED');
        // A wrong password hears what it always hears: the block tells nothing to who lacks the password.
        const wrong = await login(app, 'ada@example.com', 'not the password at all');
        assert.equal(wrong.statusCode, 401);
        assert.equal(wrong.json().code, 'INVALID_CREDENTIALS');
        assert.equal((await refresh(app, refreshToken)).statusCode, 401);
        // Even a refresh token the revocation missed (one issued by hand) is refused while disabled.
        const row = await ctx.db.query<{ id: string }>(
          'test-account',
          "SELECT id FROM auth.accounts WHERE email = 'ada@example.com'",
        );
        const { issueSession } = await import('../../src/auth/sessions.ts');
        await assert.rejects(
          issueSession(
            {
              config: ctx.config,
              db: ctx.db,
              clock: ctx.clock,
              keys: ctx.keys,
              passwords: ctx.passwords,
              revocations: ctx.revocations,
            },
            (row.rows[0] as { id: string }).id,
          ),
          /ACCOUNT_DISABLED|This account is disabled/,
        );
      });
      const listed = JSON.parse((await g.gatehouse('users', 'list', '--json')).out) as {
        email: string;
        disabled_at: string | null;
      }[];
      assert.ok(listed.find((u) => u.email === 'ada@example.com')?.disabled_at);
      const link = await g.gatehouse('users', 'reset-link', 'ada@example.com');
      assert.equal(link.code, 1);
      assert.match(link.err, /is disabled/);
      const on = await g.gatehouse('users', 'enable', 'ada@example.com');
      assert.equal(on.code, 0, on.err);
      await g.withService(async (ctx, app) => {
        assert.equal((await login(app, 'ada@example.com')).statusCode, 200);
        // The commands run the admin API's code: the same events, credited to the command line.
        const { rows } = await ctx.db.query<{ type: string; details: { by: unknown } }>(
          'test-feed',
          `SELECT e.type, e.details FROM auth.security_events e JOIN auth.accounts a ON a.id = e.account_id
            WHERE a.email = 'ada@example.com' AND e.type LIKE 'admin_%' ORDER BY e.created_at, e.type`,
        );
        const types = rows.map((r) => r.type);
        for (const t of ['admin_account_disabled', 'admin_account_enabled'])
          assert.ok(types.includes(t), `${t} in ${types.join(', ')}`);
        for (const r of rows) assert.deepEqual(r.details.by, { via: 'cli' });
      });
    });

    it('an account created without --active waits until enable activates it', async () => {
      const made = await g.gatehouse('users', 'create', 'cy@example.com', '--password', PASSWORD);
      assert.equal(made.code, 0, made.err);
      assert.match(made.err, /waits for activation/);
      await g.withService(async (_ctx, app) => {
        assert.equal((await login(app, 'cy@example.com')).json().code, 'ACCOUNT_NOT_ACTIVATED');
      });
      assert.equal((await g.gatehouse('users', 'enable', made.out.trim())).code, 0);
      await g.withService(async (_ctx, app) => {
        assert.equal((await login(app, 'cy@example.com')).statusCode, 200);
      });
    });

    it('set-role changes the default role and roles the next tokens carry', async () => {
      const set = await g.gatehouse(
        'users',
        'set-role',
        'cy@example.com',
        '--default-role',
        'me',
        '--roles',
        'user,me',
      );
      assert.equal(set.code, 0, set.err);
      await g.withService(async (_ctx, app) => {
        const c = claims((await login(app, 'cy@example.com')).json().jwt_token);
        assert.equal(c['x-hasura-default-role'], 'me');
        assert.deepEqual(c['x-hasura-allowed-roles'], ['user', 'me']);
      });
      const kept = await g.gatehouse('users', 'set-role', 'cy@example.com', '--default-role', 'anonymous');
      assert.equal(kept.code, 0, kept.err);
      assert.match(kept.err, /default role anonymous, roles user, me, anonymous/);
      assert.equal((await g.gatehouse('users', 'set-role', 'cy@example.com')).code, 2);
    });

    it('reset-link prints a real single-use reset link on stdout only, which sets the password once', async () => {
      const res = await g.gatehouse('users', 'reset-link', 'ada@example.com');
      assert.equal(res.code, 0, res.err);
      const link = new URL(res.out.trim());
      assert.equal(link.searchParams.get('type'), 'password-reset');
      const ticket = link.searchParams.get('ticket') as string;
      assert.match(ticket, /^[0-9a-f-]{36}$/);
      assert.ok(!res.err.includes(ticket), 'the ticket is printed on stdout only');
      await g.withService(async (_ctx, app) => {
        const change = (t: string) =>
          app.inject({
            method: 'POST',
            url: '/auth/change-password/change',
            payload: { ticket: t, new_password: 'a brand new password' },
          });
        assert.equal((await change(ticket)).statusCode, 204);
        assert.equal((await change(ticket)).json().code, 'INVALID_TICKET');
        assert.equal((await login(app, 'ada@example.com', 'a brand new password')).statusCode, 200);
      });
      // A newer link retires the older one, as a second lost-password email does.
      const first = new URL((await g.gatehouse('users', 'reset-link', 'ada@example.com')).out.trim());
      const second = new URL((await g.gatehouse('users', 'reset-link', 'ada@example.com')).out.trim());
      await g.withService(async (_ctx, app) => {
        const use = (u: URL) =>
          app.inject({
            method: 'POST',
            url: '/auth/change-password/change',
            payload: { ticket: u.searchParams.get('ticket'), new_password: 'yet another password' },
          });
        assert.equal((await use(first)).json().code, 'INVALID_TICKET');
        assert.equal((await use(second)).statusCode, 204);
      });
    });

    it('sessions lists where an account is signed in; sign-out ends them all, access tokens included', async () => {
      const made = await g.gatehouse('users', 'create', 'grace@example.com', '--active');
      assert.equal(made.code, 0, made.err);
      // A password for the account: the reset link, used through the service.
      const link = new URL((await g.gatehouse('users', 'reset-link', 'grace@example.com')).out.trim());
      const jwt = await g.withService(async (_ctx, app) => {
        const set = await app.inject({
          method: 'POST',
          url: '/auth/change-password/change',
          payload: { ticket: link.searchParams.get('ticket'), new_password: PASSWORD },
        });
        assert.equal(set.statusCode, 204, set.body);
        const a = await login(app, 'grace@example.com');
        const b = await login(app, 'grace@example.com');
        assert.equal(b.statusCode, 200, b.body);
        return a.json().jwt_token as string;
      });
      const listed = await g.gatehouse('users', 'sessions', 'grace@example.com', '--json');
      assert.equal(listed.code, 0, listed.err);
      const rows = JSON.parse(listed.out) as { id: string; sign_in_method: string }[];
      assert.equal(rows.length, 2);
      assert.deepEqual(
        rows.map((r) => r.sign_in_method),
        ['password', 'password'],
      );
      const out = await g.gatehouse('users', 'sign-out', 'grace@example.com');
      assert.equal(out.code, 0, out.err);
      assert.match(out.err, /grace@example\.com: 2 session\(s\) ended/);
      assert.equal(
        JSON.parse((await g.gatehouse('users', 'sessions', 'grace@example.com', '--json')).out).length,
        0,
      );
      // A service started afterwards loads the revocations: the access token is refused, not only the refresh.
      await g.withService(async (_ctx, app) => {
        const res = await app.inject({
          method: 'GET',
          url: '/auth/sessions',
          headers: { authorization: `Bearer ${jwt}` },
        });
        assert.equal(res.statusCode, 401);
        assert.equal(
          (await login(app, 'grace@example.com')).statusCode,
          200,
          'the account can sign in again',
        );
      });
    });
  });
}
