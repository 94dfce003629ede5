/**
 * The durable email outbox in one instance: links work the instant their email arrives, emails queued
 * while SMTP is down go out once it is back (once), and an email that cannot be sent is given up after
 * EMAIL_MAX_ATTEMPTS with its error recorded. Several instances and restarts: outbox-instances.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dbKinds } from '../helpers/db.ts';
import type { CapturedMail } from '../helpers/smtp.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, createAccount, type MailTestApp, queuedEmails } from './fixtures.ts';

const pathOf = (u: URL) => u.pathname + u.search;

/** Polls `check` until it returns true (every 20 ms, at most `ms`). */
async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface OutboxRowState {
  recipient: string | null;
  attempts: number;
  sent: boolean;
  failed: boolean;
  has_message: boolean;
  last_error: string | null;
}

async function outboxRows(t: MailTestApp, recipient: string): Promise<OutboxRowState[]> {
  const { rows } = await t.ctx.db.query<OutboxRowState>(
    'TestOutboxRows',
    `SELECT recipient, attempts, sent_at IS NOT NULL AS sent, failed_at IS NOT NULL AS failed,
            message IS NOT NULL AS has_message, last_error
       FROM auth.email_outbox WHERE recipient = $1 ORDER BY id`,
    [recipient],
  );
  return rows;
}

for (const kind of dbKinds()) {
  describe(`a link works the instant its email arrives [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      // No waiting for the outbox in the responses: the test follows each link as its email lands.
      t = await buildMailApp(
        kind,
        {
          AUTO_ACTIVATE_NEW_USERS: false,
          MAGIC_LINK_ENABLED: true,
          REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
          REDIRECT_URL_ERROR: 'http://app.test/failed',
        },
        { waitForEmails: false },
      );
    });
    after(() => t.close());

    /**
     * Follows the link of the next email to `to` from inside the SMTP server's DATA handler, before the
     * server has even answered the sender: the ticket must be committed by then.
     */
    const followOnArrival = (to: string, pathPart: string) =>
      new Promise<{ status: number; location: string }>((resolve, reject) => {
        t.smtp.onMessage = (mail: CapturedMail) => {
          if (!mail.to.includes(to)) return;
          t.smtp.onMessage = undefined;
          // Synchronously, inside the handler: the request is under way before the server says "250".
          t.app
            .inject({ method: 'GET', url: pathOf(findLink(mail.text, pathPart)) })
            .then(
              (res) => resolve({ status: res.statusCode, location: String(res.headers.location) }),
              reject,
            );
        };
      });

    it('an activation link followed the instant it arrives activates the account', async () => {
      const followed = followOnArrival('instant@example.com', '/auth/activate');
      const reg = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: 'instant@example.com', password: 'pw-123456' },
      });
      assert.equal(reg.statusCode, 200, reg.body);
      const { status, location } = await followed;
      assert.equal(status, 302);
      assert.match(location, /^http:\/\/app\.test\/signed-in\?.*refresh_token=/, location);
    });

    it('a magic link followed the instant it arrives signs in (register and log-in)', async () => {
      const registered = followOnArrival('magic-instant@example.com', '/auth/magic-link');
      const reg = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: 'magic-instant@example.com' },
      });
      assert.equal(reg.statusCode, 200, reg.body);
      const first = await registered;
      assert.match(first.location, /^http:\/\/app\.test\/signed-in\?.*refresh_token=/, first.location);

      // The log-in link is issued by a deferred step (after the response), then mailed.
      const loggedIn = followOnArrival('magic-instant@example.com', '/auth/magic-link');
      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'magic-instant@example.com' },
      });
      assert.deepEqual(login.json(), { magicLink: true });
      const second = await loggedIn;
      assert.match(second.location, /^http:\/\/app\.test\/signed-in\?.*refresh_token=/, second.location);
    });
  });

  describe(`emails while the SMTP server is down [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(
        kind,
        {
          AUTO_ACTIVATE_NEW_USERS: false,
          LOST_PASSWORD_ENABLED: true,
          REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
          REDIRECT_URL_ERROR: 'http://app.test/failed',
          EMAIL_RETRY_DELAY_MS: 100,
          EMAIL_RETRY_MAX_DELAY_MS: 200,
          EMAIL_POLL_INTERVAL_MS: 50,
          EMAIL_MAX_ATTEMPTS: 1000,
        },
        { waitForEmails: false },
      );
    });
    after(() => t.close());

    it('registration answers 200 while SMTP is down, and the email is delivered exactly once after it returns', async () => {
      await t.smtp.stop();
      const email = 'queued@example.com';
      try {
        const reg = await t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        assert.equal(reg.statusCode, 200, reg.body);
        await waitFor(
          'two failed attempts',
          async () => ((await outboxRows(t, email))[0]?.attempts ?? 0) >= 2,
        );
        const [row] = await outboxRows(t, email);
        assert.equal(row?.sent, false);
        assert.match(row?.last_error ?? '', /ECONNREFUSED/);
      } finally {
        await t.smtp.start();
      }
      await waitFor('the delivery', () => t.smtp.to(email).length > 0);
      // Several polls and retry delays later, still one.
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(t.smtp.to(email).length, 1);
      const [row] = await outboxRows(t, email);
      assert.equal(row?.sent, true);
      assert.equal(row?.has_message, false, 'the message, and the link in it, is erased once sent');
      assert.equal(row?.last_error, null);
      const follow = await t.app.inject({
        method: 'GET',
        url: pathOf(findLink(t.smtp.last(email).text, '/auth/activate')),
      });
      assert.match(String(follow.headers.location), /^http:\/\/app\.test\/signed-in\?/);
    });

    it('a lost-password request made while SMTP is down is mailed once when it is back', async () => {
      const email = 'forgetful@example.com';
      await createAccount(t, { email, password: 'pw-123456' });
      await t.smtp.stop();
      try {
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/change-password/request',
          payload: { email },
        });
        assert.equal(res.statusCode, 204);
        await waitFor(
          'a failed attempt',
          async () => ((await outboxRows(t, email))[0]?.last_error ?? null) !== null,
        );
      } finally {
        await t.smtp.start();
      }
      await waitFor('the delivery', () => t.smtp.to(email).length > 0);
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(t.smtp.to(email).length, 1);
      assert.equal(t.smtp.last(email).subject, 'Reset your password');
    });

    it('an email whose link expired before it could be sent is given up, not sent dead', async () => {
      t.smtp.refuse = true;
      const email = 'too-late@example.com';
      try {
        await t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        await waitFor(
          'a failed attempt',
          async () => ((await outboxRows(t, email))[0]?.last_error ?? null) !== null,
        );
        // The activation link's seven days pass while the server refuses.
        await t.ctx.db.query(
          'TestExpireOutboxRow',
          `UPDATE auth.email_outbox SET expires_at = now() - interval '1 second' WHERE recipient = $1`,
          [email],
        );
        await waitFor(
          'the email to be given up',
          async () => (await outboxRows(t, email))[0]?.failed === true,
        );
      } finally {
        t.smtp.refuse = false;
      }
      assert.match((await outboxRows(t, email))[0]?.last_error ?? '', /expired/);
      assert.equal(t.smtp.to(email).length, 0);
    });
  });

  describe(`an email that cannot be sent is given up after EMAIL_MAX_ATTEMPTS [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(
        kind,
        {
          AUTO_ACTIVATE_NEW_USERS: false,
          EMAIL_MAX_ATTEMPTS: 3,
          EMAIL_RETRY_DELAY_MS: 20,
          EMAIL_RETRY_MAX_DELAY_MS: 40,
          EMAIL_POLL_INTERVAL_MS: 20,
        },
        { waitForEmails: false },
      );
    });
    after(() => t.close());

    it('registration answers 200; after three refused attempts the email is kept as failed with its error, without its link', async () => {
      t.smtp.refuse = true;
      const email = 'doomed@example.com';
      try {
        const reg = await t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        assert.equal(reg.statusCode, 200, reg.body);
        await waitFor(
          'the email to be given up',
          async () => (await outboxRows(t, email))[0]?.failed === true,
        );
      } finally {
        t.smtp.refuse = false;
      }
      const [row] = await outboxRows(t, email);
      assert.equal(row?.attempts, 3);
      assert.match(row?.last_error ?? '', /550 Mailbox unavailable/);
      assert.equal(row?.has_message, false, 'the link is erased');
      assert.equal(row?.sent, false);
      // Given up means given up: no later attempt, even now that the server accepts.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(t.smtp.to(email).length, 0);
      assert.equal((await outboxRows(t, email))[0]?.attempts, 3);
      assert.deepEqual(await queuedEmails(t), []);
    });
  });
}
