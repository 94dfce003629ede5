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
  queuedEmails,
  signIn,
} from './fixtures.ts';

for (const kind of dbKinds()) {
  describe(`verified email change [${kind}]`, () => {
    let t: MailTestApp;
    let accountId: string;
    before(async () => {
      t = await buildMailApp(kind, {
        VERIFY_EMAILS: true,
        NOTIFY_EMAIL_CHANGE: true,
        LOST_PASSWORD_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/',
      });
      ({ accountId } = await createAccount(t, {
        email: 'old@example.com',
        password: 'pw-123',
        displayName: 'Olga',
      }));
    });
    after(() => t.close());

    // A fresh access token per call: some tests move the clock past the token's lifetime.
    const request = async (newEmail: string, token?: string, extra: Record<string, unknown> = {}) =>
      t.app.inject({
        method: 'POST',
        url: '/auth/change-email/request',
        headers: { authorization: `Bearer ${token ?? (await signIn(t, accountId)).jwt}` },
        payload: { new_email: newEmail, ...extra },
      });
    const change = (ticket: unknown) =>
      t.app.inject({ method: 'POST', url: '/auth/change-email/change', payload: { ticket } });

    it('emails the new address, switches with its ticket and notifies the old address', async () => {
      const res = await request('new@example.com');
      assert.equal(res.statusCode, 204, res.body);
      assert.equal((await accountRow(t, accountId))?.new_email, 'new@example.com');
      const mail = t.smtp.last('new@example.com');
      assert.equal(mail.subject, 'Change your email address');
      assert.match(mail.text, /Hello Olga/);
      const ticket = mail.headers.get('x-ticket') as string;
      const link = findLink(mail.text, 'app.test');
      assert.equal(link.searchParams.get('ticket'), ticket);
      assert.equal(link.searchParams.get('type'), 'email-change');
      assert.equal(findLink(mail.html, 'app.test').href, link.href);
      assert.equal(t.smtp.to('old@example.com').length, 0, 'nothing to the old address yet');

      const done = await change(link.searchParams.get('ticket'));
      assert.equal(done.statusCode, 204, done.body);
      const row = await accountRow(t, accountId);
      assert.equal(row?.email, 'new@example.com');
      assert.equal(row?.new_email, null);
      const notice = t.smtp.last('old@example.com');
      assert.equal(notice.subject, 'The email attached to your account has been changed');
      assert.match(notice.text, /new@example\.com/);

      const reuse = await change(ticket);
      assert.equal(reuse.statusCode, 401);
      assert.equal(reuse.json().code, 'INVALID_TICKET');
    });

    it('refuses a password-reset ticket on /auth/change-email/change and leaves the email as is', async () => {
      const lost = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/request',
        payload: { email: 'new@example.com' },
      });
      assert.equal(lost.statusCode, 204);
      await t.ctx.tasks.idle();
      const resetTicket = t.smtp.last('new@example.com').headers.get('x-ticket') as string;
      const res = await change(resetTicket);
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'INVALID_TICKET');
      assert.equal((await accountRow(t, accountId))?.email, 'new@example.com');
      // The reset ticket was not spent by the wrong route.
      assert.equal(await liveTickets(t, accountId, 'password-reset'), 1);
    });

    it('answers 204 while the SMTP server is down; the ticket goes out once it is back', async () => {
      await t.smtp.stop();
      try {
        const res = await request('unreachable@example.com');
        assert.equal(res.statusCode, 204, res.body);
        assert.equal((await accountRow(t, accountId))?.new_email, 'unreachable@example.com');
        assert.equal(await liveTickets(t, accountId, 'email-change'), 1);
        assert.match((await queuedEmails(t))[0]?.last_error ?? '', /ECONNREFUSED/);
      } finally {
        await t.smtp.start();
      }
      await deliverQueuedNow(t);
      assert.equal(t.smtp.to('unreachable@example.com').length, 1, 'delivered once');
      const mail = t.smtp.last('unreachable@example.com');
      assert.match(mail.text, new RegExp(`ticket=${mail.headers.get('x-ticket')}`), 'the live ticket');
      t.smtp.clear();
    });

    it('answers 204 while the SMTP server refuses the message; it goes out once the server accepts', async () => {
      t.smtp.refuse = true;
      try {
        assert.equal((await request('refused@example.com')).statusCode, 204);
      } finally {
        t.smtp.refuse = false;
      }
      assert.equal(t.smtp.to('refused@example.com').length, 0);
      await deliverQueuedNow(t);
      assert.equal(t.smtp.to('refused@example.com').length, 1);
      assert.equal(await liveTickets(t, accountId, 'email-change'), 1);
    });

    it('answers 204 but issues no ticket for an address another account uses or has asked for', async () => {
      const other = await createAccount(t, { email: 'taken@example.com', password: 'pw-123' });
      assert.equal((await request('TAKEN@example.com')).statusCode, 204);
      assert.equal(await liveTickets(t, accountId, 'email-change'), 0);
      assert.equal(t.smtp.last('taken@example.com').subject, 'Someone tried to use your email address');
      const { jwt: otherJwt } = await signIn(t, other.accountId);
      assert.equal((await request('pending@example.com', otherJwt)).statusCode, 204);
      assert.equal((await request('pending@example.com')).statusCode, 204);
      assert.equal(await liveTickets(t, accountId, 'email-change'), 0);
      assert.equal((await accountRow(t, accountId))?.new_email, null);
      assert.equal((await request('new@example.com')).statusCode, 400, 'its own current address');
    });

    it('releases a pending address once its request has expired', async () => {
      t.clock.advance(61 * 60_000);
      assert.equal((await request('pending@example.com')).statusCode, 204);
      assert.equal(await liveTickets(t, accountId, 'email-change'), 1);
    });

    it('refuses at confirmation an address taken meanwhile, keeping the email', async () => {
      const res = await request('race@example.com');
      assert.equal(res.statusCode, 204);
      const ticket = t.smtp.last('race@example.com').headers.get('x-ticket') as string;
      await createAccount(t, { email: 'race@example.com', password: 'pw-123' });
      const done = await change(ticket);
      assert.equal(done.statusCode, 400);
      assert.equal(done.json().code, 'EMAIL_NOT_ALLOWED');
      assert.notEqual((await accountRow(t, accountId))?.email, 'race@example.com');
    });

    it('refuses an expired ticket with 401 (injected clock)', async () => {
      assert.equal((await request('later@example.com')).statusCode, 204);
      const ticket = t.smtp.last('later@example.com').headers.get('x-ticket') as string;
      t.clock.advance(61 * 60_000);
      assert.equal((await change(ticket)).statusCode, 401);
      assert.notEqual((await accountRow(t, accountId))?.email, 'later@example.com');
    });

    it('answers 401 without a sign-in and 400 for bad input', async () => {
      const anon = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email/request',
        payload: { new_email: 'x@example.com' },
      });
      assert.equal(anon.statusCode, 401);
      assert.equal((await request('not-an-email')).statusCode, 400);
      assert.equal((await change('not-a-uuid')).statusCode, 400);
      assert.equal((await change(undefined)).statusCode, 400);
      assert.equal(
        (await request('ok@example.com', undefined, { redirect_to: 'https://evil.test/' })).statusCode,
        400,
      );
    });
  });
}

describe('verified email change switched off', () => {
  it('returns 404 for both routes when VERIFY_EMAILS is false', async () => {
    const t = await buildMailApp('pglite', { VERIFY_EMAILS: false });
    try {
      for (const url of ['/auth/change-email/request', '/auth/change-email/change']) {
        assert.equal((await t.app.inject({ method: 'POST', url, payload: {} })).statusCode, 404, url);
      }
    } finally {
      await t.close();
    }
  });
});
