import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import {
  buildMailApp,
  createAccount,
  liveTickets,
  type MailTestApp,
  sessionCount,
  signIn,
} from './fixtures.ts';

async function passwordHashOf(t: MailTestApp, accountId: string): Promise<string> {
  const { rows } = await t.ctx.db.query<{ password_hash: string }>(
    'TestPasswordHash',
    'SELECT password_hash FROM auth.accounts WHERE id = $1',
    [accountId],
  );
  return rows[0]?.password_hash as string;
}

for (const kind of dbKinds()) {
  describe(`lost password [${kind}]`, () => {
    let t: MailTestApp;
    let accountId: string;
    before(async () => {
      t = await buildMailApp(kind, {
        LOST_PASSWORD_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/welcome',
        ALLOWED_REDIRECT_URLS: ['http://app.test', 'https://*.example.org'],
      });
      ({ accountId } = await createAccount(t, { email: 'Lost@Example.com', password: 'old-password' }));
    });
    after(() => t.close());

    const request = (body: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/change-password/request', payload: body });
    const change = (body: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/change-password/change', payload: body });

    it('emails a reset link, sets the new password with its ticket and ends every session', async () => {
      await signIn(t, accountId);
      await signIn(t, accountId);
      const res = await request({ email: 'lost@example.com' });
      assert.equal(res.statusCode, 204);
      await t.ctx.tasks.idle();
      const mail = t.smtp.last('Lost@Example.com');
      assert.equal(mail.subject, 'Reset your password');
      const ticket = mail.headers.get('x-ticket') as string;
      const link = findLink(mail.text, 'app.test');
      assert.equal(link.searchParams.get('ticket'), ticket);
      assert.equal(link.searchParams.get('type'), 'password-reset');
      assert.equal(findLink(mail.html, 'app.test').href, link.href);

      const done = await change({ ticket, new_password: 'new-password' });
      assert.equal(done.statusCode, 204, done.body);
      assert.ok(await t.ctx.passwords.verify(await passwordHashOf(t, accountId), 'new-password'));
      assert.equal(await sessionCount(t, accountId), 0);

      const again = await change({ ticket, new_password: 'third-password' });
      assert.equal(again.statusCode, 401);
      assert.equal(again.json().code, 'INVALID_TICKET');
      assert.ok(await t.ctx.passwords.verify(await passwordHashOf(t, accountId), 'new-password'));
    });

    it('answers 204 for an unknown email and sends nothing', async () => {
      t.smtp.clear();
      const res = await request({ email: 'nobody@example.com' });
      assert.equal(res.statusCode, 204);
      assert.equal(res.body, '');
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.messages.length, 0);
    });

    it('answers 204 for an inactive account and sends nothing', async () => {
      await createAccount(t, { email: 'sleeping@example.com', password: 'x-password', active: false });
      t.smtp.clear();
      assert.equal((await request({ email: 'sleeping@example.com' })).statusCode, 204);
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.messages.length, 0);
    });

    it('refuses an expired ticket with 401 (injected clock)', async () => {
      await request({ email: 'lost@example.com' });
      await t.ctx.tasks.idle();
      const ticket = t.smtp.last('lost@example.com').headers.get('x-ticket') as string;
      t.clock.advance(61 * 60_000);
      const res = await change({ ticket, new_password: 'late-password' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'INVALID_TICKET');
    });

    it('only the latest reset link works', async () => {
      await request({ email: 'lost@example.com' });
      await t.ctx.tasks.idle();
      const first = t.smtp.last('lost@example.com').headers.get('x-ticket') as string;
      await request({ email: 'lost@example.com' });
      await t.ctx.tasks.idle();
      const second = t.smtp.last('lost@example.com').headers.get('x-ticket') as string;
      assert.notEqual(first, second);
      assert.equal((await change({ ticket: first, new_password: 'password one' })).statusCode, 401);
      assert.equal((await change({ ticket: second, new_password: 'password two' })).statusCode, 204);
    });

    it('refuses a reset ticket mailed to the old address once the email has changed', async () => {
      const { accountId: moved } = await createAccount(t, {
        email: 'mover@example.com',
        password: 'old-password',
      });
      assert.equal((await request({ email: 'mover@example.com' })).statusCode, 204);
      await t.ctx.tasks.idle();
      const ticket = t.smtp.last('mover@example.com').headers.get('x-ticket') as string;
      const { jwt } = await signIn(t, moved);
      const changed = await t.app.inject({
        method: 'POST',
        url: '/auth/change-email',
        headers: { authorization: `Bearer ${jwt}` },
        payload: { new_email: 'moved@example.com' },
      });
      assert.equal(changed.statusCode, 204, changed.body);
      const reset = await change({ ticket, new_password: 'attacker-password' });
      assert.equal(reset.statusCode, 401);
      assert.ok(await t.ctx.passwords.verify(await passwordHashOf(t, moved), 'old-password'));
    });

    it('answers 400 for a malformed ticket, a missing or short password, or unknown fields', async () => {
      const ticket = '00000000-0000-4000-8000-000000000000';
      for (const body of [
        { ticket: 'not-a-uuid', new_password: 'whatever' },
        { ticket },
        { ticket, new_password: 'ab' },
        { ticket, new_password: 'whatever', extra: 1 },
      ]) {
        const res = await change(body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().code, 'VALIDATION');
      }
      assert.equal((await change({ ticket, new_password: 'whatever' })).statusCode, 401);
      assert.equal((await request({ email: 'not an email' })).statusCode, 400);
    });

    it('links to an allowed redirect_to and refuses others with 400', async () => {
      const bad = await request({ email: 'lost@example.com', redirect_to: 'https://evil.test/reset' });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, 'REDIRECT_NOT_ALLOWED');
      const good = await request({ email: 'lost@example.com', redirect_to: 'https://app.example.org/reset' });
      assert.equal(good.statusCode, 204);
      await t.ctx.tasks.idle();
      const link = findLink(t.smtp.last('lost@example.com').text, 'example.org');
      assert.equal(link.origin + link.pathname, 'https://app.example.org/reset');
    });

    it('leaves no live ticket when the SMTP server refuses the message', async () => {
      const before = await liveTickets(t, accountId, 'password-reset');
      t.smtp.refuse = true;
      try {
        assert.equal((await request({ email: 'lost@example.com' })).statusCode, 204);
        await t.ctx.tasks.idle();
      } finally {
        t.smtp.refuse = false;
      }
      assert.equal(await liveTickets(t, accountId, 'password-reset'), before);
    });
  });
}

describe('lost password switched off', () => {
  it('returns 404 for both routes when LOST_PASSWORD_ENABLED is false', async () => {
    const t = await buildMailApp('pglite', { LOST_PASSWORD_ENABLED: false });
    try {
      for (const url of ['/auth/change-password/request', '/auth/change-password/change']) {
        const res = await t.app.inject({ method: 'POST', url, payload: {} });
        assert.equal(res.statusCode, 404, url);
      }
    } finally {
      await t.close();
    }
  });
});

describe('emails per address are limited', () => {
  it('answers 429 after RATE_LIMIT_EMAIL_MAX requests for one address, known or not', async () => {
    const t = await buildMailApp('pglite', {
      LOST_PASSWORD_ENABLED: true,
      RATE_LIMIT_ENABLED: true,
      RATE_LIMIT_EMAIL_MAX: 2,
    });
    try {
      await createAccount(t, { email: 'known@example.com', password: 'pw-123' });
      for (const email of ['known@example.com', 'unknown@example.com']) {
        const codes: number[] = [];
        for (let i = 0; i < 3; i++) {
          const res = await t.app.inject({
            method: 'POST',
            url: '/auth/change-password/request',
            payload: { email },
          });
          codes.push(res.statusCode);
        }
        assert.deepEqual(codes, [204, 204, 429], email);
      }
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.to('known@example.com').length, 2);
    } finally {
      await t.close();
    }
  });
});
