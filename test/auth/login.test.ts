import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { count, HS, login, newEmail, signUp } from './helpers.ts';

const hashOf = async (t: TestApp, email: string) =>
  (
    await t.ctx.db.query<{ h: string | null }>(
      't',
      'SELECT password_hash AS h FROM auth.accounts WHERE email = $1',
      [email],
    )
  ).rows[0]?.h;

for (const kind of dbKinds()) {
  describe(`POST /auth/login [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    it('returns a session for the right password', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email, password: s.password, cookie: false });
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['jwt_expires_in', 'jwt_token', 'refresh_token', 'user']);
      assert.equal(body.user.id, s.userId);
      assert.equal(body.user.email, s.email);
    });

    it('matches the email case-insensitively', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email.replace('user', 'USER'), password: s.password });
      assert.equal(res.statusCode, 200);
    });

    it('gives an unknown email and a wrong password the same 401 body', async () => {
      const s = await signUp(t);
      const wrong = await login(t, { email: s.email, password: 'not the password' });
      const unknown = await login(t, { email: newEmail('nobody'), password: 'not the password' });
      assert.equal(wrong.statusCode, 401);
      assert.equal(unknown.statusCode, 401);
      assert.deepEqual(wrong.json(), unknown.json());
      assert.equal(wrong.json().message, 'Username and password do not match');
    });

    it('logs in with an HBP bcrypt hash and replaces it with argon2id', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = $2 WHERE email = $1', [
        s.email,
        bcrypt.hashSync('hbp password', 10),
      ]);
      assert.match((await hashOf(t, s.email)) ?? '', /^\$2[ab]\$/);
      assert.equal((await login(t, { email: s.email, password: 'wrong one' })).statusCode, 401);
      const res = await login(t, { email: s.email, password: 'hbp password' });
      assert.equal(res.statusCode, 200, res.body);
      assert.match((await hashOf(t, s.email)) ?? '', /^\$argon2id\$/);
      assert.equal((await login(t, { email: s.email, password: 'hbp password' })).statusCode, 200);
    });

    it('answers 401 for an account without a password (anonymous or magic-link)', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = NULL WHERE email = $1', [s.email]);
      const res = await login(t, { email: s.email, password: 'anything' });
      assert.equal(res.statusCode, 401);
    });

    it('answers {mfa: true, ticket} without tokens or cookies for an MFA account', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET mfa_enabled = true WHERE email = $1', [s.email]);
      const res = await login(t, { email: s.email, password: s.password });
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.deepEqual(Object.keys(body), ['mfa', 'ticket']);
      assert.equal(body.mfa, true);
      assert.match(body.ticket, /^[0-9a-f-]{36}$/);
      assert.equal(res.headers['set-cookie'], undefined);
      assert.equal(
        await count(
          t,
          `SELECT count(*)::int AS n FROM auth.tickets WHERE purpose = 'mfa-login' AND ticket_hash = encode(sha256(convert_to($1, 'UTF8')), 'hex')`,
          [body.ticket],
        ),
        1,
      );
    });

    it('refuses the anonymous flag and the admin header when those features are off', async () => {
      const res = await login(t, { email: newEmail(), password: 'whatever', anonymous: true });
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().message, '"anonymous" is not allowed');
      const s = await signUp(t);
      const imp = await login(t, { email: s.email, password: 'wrong' }, { 'x-admin-secret': 'whatever' });
      assert.equal(imp.statusCode, 401);
      assert.equal(imp.json().message, 'Username and password do not match');
    });
  });

  describe(`anonymous sign-in and impersonation [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        ANONYMOUS_USERS_ENABLED: true,
        USER_IMPERSONATION_ENABLED: true,
        HASURA_GRAPHQL_ADMIN_SECRET: 'the-admin-secret',
      });
    });
    after(() => t.close());

    it('signs in anonymously with the anonymous role, honouring cookie like every other route', async () => {
      const res = await login(t, { anonymous: true, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.equal(typeof body.refresh_token, 'string');
      assert.equal(body.user.email, null);
      assert.equal(body.user.display_name, 'Anonymous user');
      const claims = JSON.parse(Buffer.from(body.jwt_token.split('.')[1], 'base64url').toString())[
        'https://hasura.io/jwt/claims'
      ];
      assert.equal(claims['x-hasura-default-role'], 'anonymous');
      assert.deepEqual(claims['x-hasura-allowed-roles'], ['anonymous']);
      const cookieMode = await login(t, { anonymous: true });
      assert.equal(cookieMode.json().refresh_token, undefined);
    });

    it('still signs in with a password, cookie allowed, while anonymous sign-in is on', async () => {
      const s = await signUp(t);
      assert.equal((await login(t, { email: s.email, password: s.password, cookie: true })).statusCode, 200);
    });

    it('impersonates with the right admin secret, even for an account without a password', async () => {
      const s = await signUp(t);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = NULL WHERE email = $1', [s.email]);
      const res = await login(t, { email: s.email }, { 'x-admin-secret': 'the-admin-secret' });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().user.id, s.userId);
    });

    it('answers 401 Invalid x-admin-secret to a wrong secret', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email, password: s.password }, { 'x-admin-secret': 'nope' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().message, 'Invalid x-admin-secret');
    });
  });

  describe(`impersonation without a configured admin secret [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, USER_IMPERSONATION_ENABLED: true });
    });
    after(() => t.close());

    it('never impersonates when HASURA_GRAPHQL_ADMIN_SECRET is empty', async () => {
      const s = await signUp(t);
      const res = await login(t, { email: s.email }, { 'x-admin-secret': '' });
      assert.equal(res.statusCode, 400);
      const any = await login(t, { email: s.email }, { 'x-admin-secret': 'anything' });
      assert.equal(any.statusCode, 401);
      assert.equal(any.json().message, 'Invalid x-admin-secret');
    });
  });
}
