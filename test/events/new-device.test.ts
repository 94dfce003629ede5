/**
 * The new-device notice: a sign-in from a browser family or network the account has not used in 90 days
 * emails the owner once (through the outbox), with no link that signs in; the same device again sends
 * nothing, and neither does the account's very first sign-in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadProfile } from '../../src/auth/accounts-store.ts';
import { noticeNewDevice } from '../../src/auth/new-device.ts';
import { authDeps } from '../../src/context.ts';
import { signUp } from '../auth/helpers.ts';
import { dbKinds } from '../helpers/db.ts';
import { buildMailApp, type MailTestApp } from '../mail/fixtures.ts';
import { accountIdOf } from './helpers.ts';

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0';
const FIREFOX_NEXT = 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0';
const SUBJECT = 'New sign-in to your account';

for (const kind of dbKinds()) {
  describe(`new-device notice [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { REDIRECT_URL_SUCCESS: 'http://app.test/home' });
    });
    after(() => t.close());

    const notices = (email: string) => t.smtp.to(email).filter((m) => m.subject === SUBJECT);
    // Text that came from a client is broken with zero-width spaces so mail apps make no link of it.
    const plain = (text: string | undefined) => (text ?? '').replaceAll('\u200b', '');
    const signInFrom = async (
      a: { email: string; password: string },
      ua: string | undefined,
      ip = '127.0.0.1',
    ) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: a.email, password: a.password, cookie: false },
        headers: ua === undefined ? {} : { 'user-agent': ua },
        remoteAddress: ip,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as { jwt_token: string; refresh_token: string };
    };

    it('sends nothing for the account’s first sign-in, nor for the same device again', async () => {
      const a = await signUp(t);
      assert.equal(notices(a.email).length, 0);
      // signUp's request had light-my-request's own User-Agent and 127.0.0.1: the same device.
      await signInFrom(a, undefined);
      assert.equal(notices(a.email).length, 0);
    });

    it('emails once for a new browser family, and not again for it (a browser update is the same)', async () => {
      const a = await signUp(t);
      const s = await signInFrom(a, FIREFOX);
      const sent = notices(a.email);
      assert.equal(sent.length, 1);
      const mail = sent[0];
      assert.ok(mail);
      assert.match(plain(mail.text), /Firefox on Linux/);
      assert.match(plain(mail.text), /127\.0\.0\.0\/24/);
      // No link that signs in: the only link is the application's home, with no ticket or token.
      const links = [...mail.text.matchAll(/https?:\/\/[^\s"'<>)]+/g)].map((m) => m[0]);
      assert.deepEqual([...new Set(links)], ['http://app.test/home']);
      assert.ok(!mail.html.includes('ticket') && !mail.html.includes('token'));
      assert.ok(!mail.text.includes(s.refresh_token) && !mail.text.includes(s.jwt_token));
      assert.equal(mail.headers.get('x-ticket'), undefined);

      await signInFrom(a, FIREFOX);
      await signInFrom(a, FIREFOX_NEXT);
      assert.equal(notices(a.email).length, 1);
    });

    it('emails for another network (/24), not for another address of a known one', async () => {
      const a = await signUp(t);
      await signInFrom(a, undefined, '203.0.113.5');
      assert.equal(notices(a.email).length, 1);
      assert.match(plain(notices(a.email)[0]?.text), /203\.0\.113\.0\/24/);
      await signInFrom(a, undefined, '203.0.113.250');
      assert.equal(notices(a.email).length, 1);
      await signInFrom(a, undefined, '2001:db8:1:2::5');
      await signInFrom(a, undefined, '2001:db8:1:ffff::9');
      assert.equal(notices(a.email).length, 2);
    });

    it('emails again for a device last seen more than 90 days ago', async () => {
      const a = await signUp(t);
      await signInFrom(a, FIREFOX);
      assert.equal(notices(a.email).length, 1);
      t.clock.advance(91 * 86_400_000);
      await signInFrom(a, FIREFOX);
      assert.equal(notices(a.email).length, 2);
      await signInFrom(a, FIREFOX);
      assert.equal(notices(a.email).length, 2);
    });

    it('sends nothing with NOTIFY_NEW_SIGN_IN off', async () => {
      const a = await signUp(t);
      const accountId = await accountIdOf(t, a.userId);
      const deps = authDeps(t.ctx);
      const profile = await loadProfile(t.ctx.db, accountId);
      assert.ok(profile);
      const input = {
        profile,
        sessionId: '00000000-0000-4000-8000-000000000001',
        client: { ip: '198.51.100.1', userAgent: FIREFOX },
        method: 'password',
      };
      const off = { ...deps, config: { ...deps.config, NOTIFY_NEW_SIGN_IN: false } };
      assert.equal(await noticeNewDevice(off, t.ctx.db, input), false);
      // The same sign-in with the setting on would have told the owner.
      assert.equal(await noticeNewDevice(deps, t.ctx.db, input), true);
    });
  });
}
