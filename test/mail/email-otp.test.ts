/**
 * Email one-time codes (EMAIL_OTP_ENABLED): a 6-digit code mailed through the outbox to a real SMTP
 * server, traded for a session. Threats: guessing (5 wrong codes kill a code), a code replayed by two
 * racing verifications (one session), a code for one address used on another, enumeration of accounts
 * (the request always answers 204; a wrong code is the same 401 whether or not the address has an
 * account), a pending registration's password chosen by someone else (not kept).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dbKinds } from '../helpers/db.ts';
import type { CapturedMail } from '../helpers/smtp.ts';
import { accountRow, buildMailApp, createAccount, type MailTestApp, sessionCount } from './fixtures.ts';

const PASSWORD = 'correct horse battery';
const codeOf = (mail: CapturedMail) => {
  const m = /code is: (\d{6})/.exec(mail.text);
  assert.ok(m, mail.text);
  return m[1] as string;
};

for (const kind of dbKinds()) {
  describe(`email one-time codes [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { EMAIL_OTP_ENABLED: true, AUTO_ACTIVATE_NEW_USERS: false });
    });
    after(() => t.close());

    const ask = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/otp/email', payload });
    const verify = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/otp/email/verify', payload });

    it('mails a code to an active account and trades it for the session answer of POST /auth/login', async () => {
      const email = 'otp-active@example.com';
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      const res = await ask({ email });
      assert.equal(res.statusCode, 204, res.body);
      const mail = t.smtp.last(email);
      assert.match(mail.subject, /^Your sign-in code: \d{6}$/);
      const code = codeOf(mail);
      const ok = await verify({ email, code, cookie: false });
      assert.equal(ok.statusCode, 200, ok.body);
      const body = ok.json();
      assert.ok(body.jwt_token);
      assert.ok(body.refresh_token);
      assert.equal(body.user.email, email);
      const { rows } = await t.ctx.db.query<{ sign_in_method: string }>(
        'test-method',
        'SELECT sign_in_method FROM auth.sessions WHERE account_id = $1',
        [accountId],
      );
      assert.deepEqual(
        rows.map((r) => r.sign_in_method),
        ['email-otp'],
      );
      // The address's first proof hands the account to the mailbox: the password typed by whoever
      // created the account no longer signs in (as with a magic link).
      const old = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email, password: PASSWORD },
      });
      assert.equal(old.statusCode, 401, old.body);
      // Single use.
      const again = await verify({ email, code });
      assert.equal(again.statusCode, 401);
      assert.equal(again.json().code, 'INVALID_CODE');
    });

    it('answers 204 for an unknown address and sends nothing without create_user', async () => {
      const res = await ask({ email: 'otp-nobody@example.com' });
      assert.equal(res.statusCode, 204);
      assert.equal(t.smtp.to('otp-nobody@example.com').length, 0);
      const wrong = await verify({ email: 'otp-nobody@example.com', code: '123456' });
      assert.equal(wrong.statusCode, 401);
      assert.equal(wrong.json().code, 'INVALID_CODE');
      assert.equal(wrong.json().message, 'Invalid or expired code.');
    });

    it('signs up an unknown address with create_user: the code activates the account', async () => {
      const email = 'otp-new@example.com';
      assert.equal((await ask({ email, create_user: true })).statusCode, 204);
      const mail = t.smtp.last(email);
      assert.match(mail.subject, /sign-up code/);
      const ok = await verify({ email, code: codeOf(mail), cookie: false });
      assert.equal(ok.statusCode, 200, ok.body);
      const { rows } = await t.ctx.db.query<{ active: boolean; email_verified_by: string }>(
        'test-new',
        'SELECT active, email_verified_by FROM auth.accounts WHERE email = $1',
        [email],
      );
      assert.deepEqual(rows[0], { active: true, email_verified_by: 'email-otp' });
    });

    it('keeps no password a pending registration chose: the code proves the mailbox, not the registrant', async () => {
      const email = 'otp-pending@example.com';
      // Someone registers the address with their password; the account waits for activation.
      const reg = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email, password: PASSWORD },
      });
      assert.equal(reg.statusCode, 200, reg.body);
      // Without create_user a pending address gets no code.
      t.smtp.clear();
      await ask({ email });
      assert.deepEqual(
        t.smtp.to(email).map((m) => m.subject),
        [],
      );
      await ask({ email, create_user: true });
      const ok = await verify({ email, code: codeOf(t.smtp.last(email)), cookie: false });
      assert.equal(ok.statusCode, 200, ok.body);
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email, password: PASSWORD },
      });
      assert.equal(login.statusCode, 401, 'the registrant’s password was not kept');
    });

    it('kills a code after 5 wrong tries', async () => {
      const email = 'otp-guess@example.com';
      await createAccount(t, { email, password: PASSWORD });
      await ask({ email });
      const code = codeOf(t.smtp.last(email));
      const wrong = code === '000000' ? '000001' : '000000';
      for (let i = 0; i < 5; i++) {
        const r = await verify({ email, code: wrong });
        assert.equal(r.statusCode, 401);
        assert.equal(r.json().code, 'INVALID_CODE');
      }
      const right = await verify({ email, code });
      assert.equal(right.statusCode, 401, 'the right code no longer works');
      assert.equal(right.json().code, 'INVALID_CODE');
    });

    it('retires the old code when a new one is sent', async () => {
      const email = 'otp-twice@example.com';
      await createAccount(t, { email, password: PASSWORD });
      await ask({ email });
      const first = codeOf(t.smtp.last(email));
      await ask({ email });
      const second = codeOf(t.smtp.last(email));
      if (first !== second) {
        const old = await verify({ email, code: first });
        assert.equal(old.statusCode, 401);
      }
      const ok = await verify({ email, code: second, cookie: false });
      assert.equal(ok.statusCode, 200, ok.body);
    });

    it('refuses a code sent to another address', async () => {
      const alice = 'otp-alice@example.com';
      const mallory = 'otp-mallory@example.com';
      const { accountId } = await createAccount(t, { email: alice, password: PASSWORD });
      await createAccount(t, { email: mallory, password: PASSWORD });
      await ask({ email: mallory });
      const r = await verify({ email: alice, code: codeOf(t.smtp.last(mallory)) });
      assert.equal(r.statusCode, 401);
      assert.equal(r.json().code, 'INVALID_CODE');
      assert.equal(await sessionCount(t, accountId), 0);
    });

    it('opens one session when two verifications of the same code race', async () => {
      const email = 'otp-race@example.com';
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      await ask({ email });
      const code = codeOf(t.smtp.last(email));
      const answers = await Promise.all([
        verify({ email, code, cookie: false }),
        verify({ email, code, cookie: false }),
        verify({ email, code, cookie: false }),
      ]);
      const statuses = answers.map((a) => a.statusCode).sort();
      assert.deepEqual(statuses, [200, 401, 401], answers.map((a) => a.body).join('\n'));
      assert.equal(await sessionCount(t, accountId), 1);
    });

    it('sends nothing to a disabled account', async () => {
      const email = 'otp-disabled@example.com';
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      await t.ctx.db.query('test-disable', 'UPDATE auth.accounts SET disabled_at = now() WHERE id = $1', [
        accountId,
      ]);
      assert.equal((await ask({ email })).statusCode, 204);
      assert.equal(t.smtp.to(email).length, 0);
      assert.equal((await accountRow(t, accountId))?.active, true);
    });

    it('refuses a malformed code with 400', async () => {
      for (const code of ['12345', '1234567', 'abcdef', '']) {
        const r = await verify({ email: 'otp-active@example.com', code });
        assert.equal(r.statusCode, 400, code);
      }
    });
  });

  describe(`email one-time codes with magic links on [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { EMAIL_OTP_ENABLED: true, MAGIC_LINK_ENABLED: true });
    });
    after(() => t.close());

    it('puts the code and a magic link in the same email', async () => {
      const email = 'otp-link@example.com';
      await createAccount(t, { email, password: PASSWORD });
      const res = await t.app.inject({ method: 'POST', url: '/auth/otp/email', payload: { email } });
      assert.equal(res.statusCode, 204);
      const mail = t.smtp.last(email);
      assert.match(codeOf(mail), /^\d{6}$/);
      assert.match(
        mail.text,
        /http:\/\/gatehouse\.test\/auth\/magic-link\?action=log-in&token=[0-9a-f-]{36}/,
      );
    });
  });

  describe(`email one-time codes switched off [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {});
    });
    after(() => t.close());

    it('answers 404 when EMAIL_OTP_ENABLED is false', async () => {
      const r = await t.app.inject({
        method: 'POST',
        url: '/auth/otp/email',
        payload: { email: 'a@example.com' },
      });
      assert.equal(r.statusCode, 404);
    });
  });
}
