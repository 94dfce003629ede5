/**
 * Issue 15, point 2: a stolen access token must not buy the account. The thief here holds what leaks
 * from a browser: a fresh access token of a session whose sign-in is older than SENSITIVE_ACTION_WINDOW
 * (kept alive by refreshes). Every sensitive change must refuse it, change nothing, and work for the
 * owner who sends the current password or has just signed in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { accountRow, buildMailApp, createAccount, liveTickets, type MailTestApp } from '../mail/fixtures.ts';
import { authenticatorCode } from '../mfa/helpers.ts';

interface Tokens {
  jwt: string;
  refresh: string;
}

const PASSWORD = 'the owner password';

async function passwordSignIn(t: MailTestApp, email: string, password = PASSWORD): Promise<Tokens> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password, cookie: false },
  });
  assert.equal(res.statusCode, 200, res.body);
  return { jwt: res.json().jwt_token, refresh: res.json().refresh_token };
}

async function refreshed(t: MailTestApp, refresh: string): Promise<Tokens> {
  const res = await t.app.inject({
    method: 'GET',
    url: `/auth/token/refresh?refresh_token=${encodeURIComponent(refresh)}`,
  });
  assert.equal(res.statusCode, 200, res.body);
  return { jwt: res.json().jwt_token, refresh: res.json().refresh_token };
}

/** The clock moves past the window in two steps, the session refreshing at each: what a thief copies then. */
async function stolenLater(t: MailTestApp, s: Tokens): Promise<Tokens> {
  let current = s;
  for (let i = 0; i < 2; i++) {
    t.clock.advance((t.config.SENSITIVE_ACTION_WINDOW * 1000) / 2 + 1000);
    current = await refreshed(t, current.refresh);
  }
  return current;
}

const post = (t: MailTestApp, url: string, jwt: string, payload: Record<string, unknown> = {}) =>
  t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${jwt}` }, payload });

function assertReauthRequired(res: LightMyRequestResponse): void {
  assert.equal(res.statusCode, 403, res.body);
  assert.equal(res.json().code, 'REAUTHENTICATION_REQUIRED');
  assert.match(String(res.json().message), /sign in again/);
}

let n = 0;
const address = (what: string) => `${what}-${++n}@example.com`;

for (const kind of dbKinds()) {
  describe(`sensitive changes need more than a bearer token [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        ALLOW_USER_SELF_DELETE: true,
        MAGIC_LINK_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/',
      });
    });
    after(() => t.close());

    const owner = async () => {
      const email = address('owner');
      const { accountId, userId } = await createAccount(t, { email, password: PASSWORD });
      return { email, accountId, userId, session: await passwordSignIn(t, email) };
    };

    it('a stolen access token cannot change the email (direct)', async () => {
      const o = await owner();
      const stolen = await stolenLater(t, o.session);
      t.smtp.clear();
      const thief = address('thief');
      assertReauthRequired(await post(t, '/auth/change-email', stolen.jwt, { new_email: thief }));
      const guess = await post(t, '/auth/change-email', stolen.jwt, { new_email: thief, password: 'guess' });
      assert.equal(guess.statusCode, 401);
      assert.equal(guess.json().code, 'INCORRECT_PASSWORD');
      assert.equal((await accountRow(t, o.accountId))?.email, o.email);
      assert.equal(t.smtp.messages.length, 0, 'nobody is emailed');
      await refreshed(t, stolen.refresh); // the session is untouched

      const proved = await post(t, '/auth/change-email', stolen.jwt, {
        new_email: thief,
        password: PASSWORD,
      });
      assert.equal(proved.statusCode, 204, proved.body);
      assert.equal((await accountRow(t, o.accountId))?.email, thief);
    });

    it('a stolen access token cannot delete the account', async () => {
      const o = await owner();
      const stolen = await stolenLater(t, o.session);
      assertReauthRequired(await post(t, '/auth/delete', stolen.jwt));
      assert.equal((await post(t, '/auth/delete', stolen.jwt, { password: 'guess' })).statusCode, 401);
      assert.equal((await accountRow(t, o.accountId))?.email, o.email);
      await passwordSignIn(t, o.email);

      assert.equal((await post(t, '/auth/delete', stolen.jwt, { password: PASSWORD })).statusCode, 204);
      assert.equal(await accountRow(t, o.accountId), undefined);
    });

    it('a stolen access token cannot disable MFA', async () => {
      const o = await owner();
      const secret = (await post(t, '/auth/mfa/generate', o.session.jwt)).json().otp_secret as string;
      const code = () => authenticatorCode(secret, t.clock.now().getTime());
      assert.equal((await post(t, '/auth/mfa/enable', o.session.jwt, { code: code() })).statusCode, 204);
      // A sign-in with the second factor, then the session lives on.
      t.clock.advance(30_000);
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: o.email, password: PASSWORD },
      });
      const totp = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/totp',
        payload: { ticket: login.json().ticket, code: code(), cookie: false },
      });
      assert.equal(totp.statusCode, 200, totp.body);
      const stolen = await stolenLater(t, { jwt: totp.json().jwt_token, refresh: totp.json().refresh_token });

      const current = code();
      assertReauthRequired(await post(t, '/auth/mfa/disable', stolen.jwt, { code: current }));
      const mfa = await t.ctx.db.query<{ mfa_enabled: boolean }>(
        'test-mfa',
        'SELECT mfa_enabled FROM auth.accounts WHERE id = $1',
        [o.accountId],
      );
      assert.equal(mfa.rows[0]?.mfa_enabled, true);
      // The refused request did not spend the code: with the password, the same code works.
      const proved = await post(t, '/auth/mfa/disable', stolen.jwt, { code: current, password: PASSWORD });
      assert.equal(proved.statusCode, 204, proved.body);
    });

    it('a stolen access token cannot replace a credential (MFA enrolment)', async () => {
      const o = await owner();
      // The owner started an enrolment while signed in; the thief comes later.
      const secret = (await post(t, '/auth/mfa/generate', o.session.jwt)).json().otp_secret as string;
      const stolen = await stolenLater(t, o.session);
      const pending = () =>
        t.ctx.db
          .query<{ pending_secret: string | null }>(
            'test-pending',
            'SELECT pending_secret FROM auth.account_mfa WHERE account_id = $1',
            [o.accountId],
          )
          .then((r) => r.rows[0]?.pending_secret);
      const before = await pending();
      assertReauthRequired(await post(t, '/auth/mfa/generate', stolen.jwt));
      assert.equal(await pending(), before, 'the pending secret is not replaced');
      // Even a right code from the pending secret does not turn MFA on without the proof.
      const code = authenticatorCode(secret, t.clock.now().getTime());
      assertReauthRequired(await post(t, '/auth/mfa/enable', stolen.jwt, { code }));
      const row = await t.ctx.db.query<{ mfa_enabled: boolean }>(
        'test-mfa',
        'SELECT mfa_enabled FROM auth.accounts WHERE id = $1',
        [o.accountId],
      );
      assert.equal(row.rows[0]?.mfa_enabled, false);
      assert.equal(
        (await post(t, '/auth/mfa/enable', stolen.jwt, { code, password: PASSWORD })).statusCode,
        204,
      );
    });

    it('a stolen access token cannot replace a credential (a first password on a password-less account)', async () => {
      const email = address('magic');
      const { accountId } = await createAccount(t, { email });
      const magicSignIn = async (): Promise<Tokens> => {
        t.smtp.clear();
        await t.app.inject({ method: 'POST', url: '/auth/login', payload: { email } });
        await t.ctx.tasks.idle();
        const link = findLink(t.smtp.last(email).text, 'action=log-in');
        const follow = await t.app.inject({
          method: 'GET',
          url: `${link.pathname}${link.search}&cookie=false`,
        });
        assert.equal(follow.statusCode, 302, follow.body);
        const refresh = new URL(follow.headers.location as string).searchParams.get(
          'refresh_token',
        ) as string;
        return refreshed(t, refresh);
      };
      const stolen = await stolenLater(t, await magicSignIn());
      const hash = async () =>
        (
          await t.ctx.db.query<{ password_hash: string | null }>(
            'test-hash',
            'SELECT password_hash FROM auth.accounts WHERE id = $1',
            [accountId],
          )
        ).rows[0]?.password_hash;
      const res = await post(t, '/auth/change-password', stolen.jwt, { new_password: 'the thief password' });
      assertReauthRequired(res);
      assert.match(res.json().message, /has no password/);
      assert.equal(await hash(), null);

      // Right after a sign-in (here by magic link) the owner sets one.
      const fresh = await magicSignIn();
      const set = await post(t, '/auth/change-password', fresh.jwt, { new_password: 'the owner choice' });
      assert.equal(set.statusCode, 204, set.body);
      assert.notEqual(await hash(), null);
    });

    it('refreshing does not extend the re-authentication window', async () => {
      const o = await owner();
      const signedInAt = decodeJwt(o.session.jwt).auth_time;
      assert.equal(typeof signedInAt, 'number');
      const half = (t.config.SENSITIVE_ACTION_WINDOW * 1000) / 2 + 1000;

      t.clock.advance(half);
      const early = await refreshed(t, o.session.refresh);
      assert.equal(decodeJwt(early.jwt).auth_time, signedInAt);
      assert.equal(
        (await post(t, '/auth/mfa/generate', early.jwt)).statusCode,
        200,
        'still within the window',
      );

      t.clock.advance(half);
      const late = await refreshed(t, early.refresh);
      assert.equal(decodeJwt(late.jwt).auth_time, signedInAt, 'the refresh keeps the sign-in instant');
      assertReauthRequired(await post(t, '/auth/mfa/generate', late.jwt));
      // A sibling from the reuse grace (two tabs racing) is no fresher.
      const sibling = await refreshed(t, early.refresh);
      assert.equal(decodeJwt(sibling.jwt).auth_time, signedInAt);
      assertReauthRequired(await post(t, '/auth/mfa/generate', sibling.jwt));

      const proved = await post(t, '/auth/mfa/generate', late.jwt, { password: PASSWORD });
      assert.equal(proved.statusCode, 200, proved.body);
      // A new sign-in opens a new window.
      const again = await passwordSignIn(t, o.email);
      assert.equal((await post(t, '/auth/mfa/generate', again.jwt)).statusCode, 200);
    });

    it('a session stored before sign-in times were kept counts as not recent', async () => {
      const o = await owner();
      const legacy = 'f0e1d2c3-b4a5-4697-8877-665544332211';
      await t.ctx.db.query(
        'test-legacy-token',
        `WITH session AS (
           INSERT INTO auth.sessions (id, account_id, created_at, last_active_at, expires_at)
           VALUES (gen_random_uuid(), $2, now(), now(), $3) RETURNING id
         )
         INSERT INTO auth.session_tokens (token_hash, family_id, account_id, expires_at)
         SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex'), id, $2, $3 FROM session`,
        [legacy, o.accountId, new Date(t.clock.now().getTime() + 86_400_000)],
      );
      const s = await refreshed(t, legacy);
      assert.equal(decodeJwt(s.jwt).auth_time, undefined);
      assertReauthRequired(await post(t, '/auth/change-email', s.jwt, { new_email: address('moved') }));
      assert.equal((await accountRow(t, o.accountId))?.email, o.email);
    });

    it('the email change right after sign-in keeps working', async () => {
      const o = await owner();
      const next = address('moved');
      const res = await post(t, '/auth/change-email', o.session.jwt, { new_email: next });
      assert.equal(res.statusCode, 204, res.body);
      assert.equal((await accountRow(t, o.accountId))?.email, next);
      await refreshed(t, o.session.refresh); // the caller stays signed in
    });
  });

  describe(`the requested email change needs more than a bearer token [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { VERIFY_EMAILS: true, REDIRECT_URL_SUCCESS: 'http://app.test/' });
    });
    after(() => t.close());

    it('a stolen access token cannot change the email (requested)', async () => {
      const email = address('owner');
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      const stolen = await stolenLater(t, await passwordSignIn(t, email));
      t.smtp.clear();
      const thief = address('thief');
      assertReauthRequired(await post(t, '/auth/change-email/request', stolen.jwt, { new_email: thief }));
      const guess = await post(t, '/auth/change-email/request', stolen.jwt, {
        new_email: thief,
        password: 'guess',
      });
      assert.equal(guess.statusCode, 401);
      assert.equal(guess.json().code, 'INCORRECT_PASSWORD');
      assert.equal(t.smtp.to(thief).length, 0, 'no ticket reaches the thief');
      assert.equal(await liveTickets(t, accountId, 'email-change'), 0);
      assert.equal((await accountRow(t, accountId))?.new_email, null);

      const proved = await post(t, '/auth/change-email/request', stolen.jwt, {
        new_email: thief,
        password: PASSWORD,
      });
      assert.equal(proved.statusCode, 204, proved.body);
      assert.equal(await liveTickets(t, accountId, 'email-change'), 1);
    });

    it('the email change right after sign-in keeps working (requested)', async () => {
      const email = address('owner');
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      const s = await passwordSignIn(t, email);
      const next = address('moved');
      assert.equal((await post(t, '/auth/change-email/request', s.jwt, { new_email: next })).statusCode, 204);
      const ticket = t.smtp.last(next).headers.get('x-ticket') as string;
      // The link is followed later, maybe elsewhere: the ticket is the proof then.
      t.clock.advance(t.config.SENSITIVE_ACTION_WINDOW * 1000 * 2);
      const done = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email/change',
        payload: { ticket },
      });
      assert.equal(done.statusCode, 204, done.body);
      assert.equal((await accountRow(t, accountId))?.email, next);
    });
  });

  describe(`wrong passwords on sensitive changes [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        ALLOW_USER_SELF_DELETE: true,
        RATE_LIMIT_ENABLED: true,
        RATE_LIMIT_LOGIN_ACCOUNT_MAX: 3,
      });
    });
    after(() => t.close());

    it('a stolen access token cannot guess the password beyond the sign-in failure limit', async () => {
      const email = address('owner');
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      const stolen = await stolenLater(t, await passwordSignIn(t, email));
      for (let i = 0; i < 3; i++) {
        const res = await post(t, '/auth/delete', stolen.jwt, { password: `guess ${i}` });
        assert.equal(res.statusCode, 401, res.body);
      }
      // The three free guesses are spent: the next one, even the right password, must wait.
      const limited = await post(t, '/auth/delete', stolen.jwt, { password: PASSWORD });
      assert.equal(limited.statusCode, 429);
      assert.ok(Number(limited.headers['retry-after']) > 0);
      // The same budget as POST /auth/login for this account and address.
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email, password: PASSWORD, cookie: false },
      });
      assert.equal(login.statusCode, 429);
      assert.notEqual(await accountRow(t, accountId), undefined);
    });
  });
}
