import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { buildTestApp, tempDir } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, deliverQueuedNow, liveTickets, type MailTestApp, queuedEmails } from './fixtures.ts';

const pathOf = (u: URL) => u.pathname + u.search;

async function accountByEmail(t: MailTestApp, email: string) {
  const { rows } = await t.ctx.db.query<{ id: string; active: boolean }>(
    'TestAccountByEmail',
    'SELECT id, active FROM auth.accounts WHERE email = $1::citext',
    [email],
  );
  return rows[0];
}

for (const kind of dbKinds()) {
  describe(`activation emails [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        REDIRECT_URL_SUCCESS: 'http://app.test/welcome?from=email',
        REDIRECT_URL_ERROR: 'http://app.test/oops',
        ALLOWED_REDIRECT_URLS: ['https://*.example.org'],
      });
    });
    after(() => t.close());

    const register = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/register', payload });

    it('emails an activation link on registration; following it activates and redirects with a refresh token', async () => {
      const res = await register({ email: 'new@example.com', password: 'pw-123456' });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(Object.keys(res.json()), ['user']);
      const mail = t.smtp.last('new@example.com');
      assert.equal(mail.subject, 'Confirm your email address');
      assert.match(mail.from, /no-reply@gatehouse\.test/);
      const link = findLink(mail.text, '/auth/activate');
      assert.equal(link.origin, 'http://gatehouse.test');
      assert.equal(link.searchParams.get('ticket'), mail.headers.get('x-ticket'));
      assert.equal(findLink(mail.html, '/auth/activate').href, link.href);

      const login = await t.app.inject({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'new@example.com', password: 'pw-123456' },
      });
      assert.equal(login.statusCode, 400, 'not active yet');

      const follow = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(follow.statusCode, 302);
      const to = new URL(follow.headers.location as string);
      assert.equal(to.searchParams.get('from'), 'email', "the success URL's own query is kept");
      assert.ok(to.searchParams.get('refresh_token'));
      assert.equal((await accountByEmail(t, 'new@example.com'))?.active, true);

      const reuse = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(reuse.statusCode, 302);
      assert.equal(reuse.headers.location, 'http://app.test/oops');
    });

    it('registers while the SMTP server refuses the activation email; the email goes out once it accepts, and its link works', async () => {
      t.smtp.refuse = true;
      try {
        const res = await register({ email: 'refused@example.com', password: 'pw-123456' });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal((await accountByEmail(t, 'refused@example.com'))?.active, false, 'the account exists');
        assert.equal(t.smtp.to('refused@example.com').length, 0);
        const [queued] = await queuedEmails(t);
        assert.equal(queued?.recipient, 'refused@example.com');
        assert.equal(queued?.attempts, 1);
        assert.match(queued?.last_error ?? '', /550/, 'the refusal is recorded');
      } finally {
        t.smtp.refuse = false;
      }
      await deliverQueuedNow(t);
      assert.equal(t.smtp.to('refused@example.com').length, 1, 'delivered once');
      const link = findLink(t.smtp.last('refused@example.com').text, '/auth/activate');
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(link) })).statusCode, 302);
      assert.equal((await accountByEmail(t, 'refused@example.com'))?.active, true);
      assert.deepEqual(await queuedEmails(t), []);
    });

    it('resends a fresh link (the old one stops working) and answers the same for unknown addresses', async () => {
      await register({ email: 'again@example.com', password: 'pw-123456' });
      const first = findLink(t.smtp.last('again@example.com').text, '/auth/activate');
      const resend = await t.app.inject({
        method: 'POST',
        url: '/auth/activate/resend',
        payload: { email: 'again@example.com' },
      });
      assert.equal(resend.statusCode, 204);
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.to('again@example.com').length, 2);
      const second = findLink(t.smtp.last('again@example.com').text, '/auth/activate');
      assert.notEqual(first.href, second.href);
      assert.equal(
        (await t.app.inject({ method: 'GET', url: pathOf(first) })).headers.location,
        'http://app.test/oops',
      );
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(second) })).statusCode, 302);

      t.smtp.clear();
      for (const email of ['nobody@example.com', 'again@example.com']) {
        const r = await t.app.inject({ method: 'POST', url: '/auth/activate/resend', payload: { email } });
        assert.equal(r.statusCode, 204, email);
        assert.equal(r.body, '');
      }
      await t.ctx.tasks.idle();
      assert.equal(t.smtp.messages.length, 0, 'nothing for unknown or already active accounts');
    });

    it('refuses an activation link after 7 days (injected clock)', async () => {
      await register({ email: 'slow@example.com', password: 'pw-123456' });
      const link = findLink(t.smtp.last('slow@example.com').text, '/auth/activate');
      t.clock.advance(7 * 24 * 60 * 60_000 + 1000);
      const res = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(res.headers.location, 'http://app.test/oops');
      assert.equal((await accountByEmail(t, 'slow@example.com'))?.active, false);
    });

    it('leads to an allowed redirect_to given at registration, and refuses others with 400', async () => {
      const bad = await register({
        email: 'r1@example.com',
        password: 'pw-123456',
        redirect_to: 'https://evil.test',
      });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, 'REDIRECT_NOT_ALLOWED');
      assert.equal(await accountByEmail(t, 'r1@example.com'), undefined);
      await register({
        email: 'r2@example.com',
        password: 'pw-123456',
        redirect_to: 'https://app.example.org/in',
      });
      const link = findLink(t.smtp.last('r2@example.com').text, '/auth/activate');
      const res = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.match(res.headers.location as string, /^https:\/\/app\.example\.org\/in\?refresh_token=/);
    });
  });
}

describe('activation without redirect settings or without emails', () => {
  it('answers the session as JSON when REDIRECT_URL_SUCCESS is not set (development, console off)', async () => {
    const t = await buildMailApp('pglite', { AUTO_ACTIVATE_NEW_USERS: false, CONSOLE_ENABLED: false });
    try {
      await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: 'dev@example.com', password: 'pw-123456' },
      });
      const link = findLink(t.smtp.last('dev@example.com').text, '/auth/activate');
      const res = await t.app.inject({ method: 'GET', url: `${pathOf(link)}&cookie=false` });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().user.email, 'dev@example.com');
      assert.ok(res.json().refresh_token);
      const reuse = await t.app.inject({ method: 'GET', url: pathOf(link) });
      assert.equal(reuse.statusCode, 401);
      assert.equal(reuse.json().code, 'INVALID_TICKET');
    } finally {
      await t.close();
    }
  });

  it('keeps the account inactive with no ticket and no resend route when EMAILS_ENABLED is false', async () => {
    const t = await buildMailApp('pglite', { AUTO_ACTIVATE_NEW_USERS: false, EMAILS_ENABLED: false });
    try {
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email: 'quiet@example.com', password: 'pw-123456' },
      });
      assert.equal(res.statusCode, 200);
      const account = await accountByEmail(t, 'quiet@example.com');
      assert.equal(account?.active, false);
      assert.equal(await liveTickets(t, account?.id as string, 'activation'), 0);
      assert.equal(t.smtp.messages.length, 0);
      const resend = await t.app.inject({
        method: 'POST',
        url: '/auth/activate/resend',
        payload: { email: 'quiet@example.com' },
      });
      assert.equal(resend.statusCode, 404);
    } finally {
      await t.close();
    }
  });
});

describe('HBP-style template folder and locales, end to end', () => {
  it('renders the operator’s EJS templates with their variables, in the locale given at registration', async () => {
    const dir = tempDir();
    const hbp = path.join(dir, 'activate-account');
    mkdirSync(path.join(hbp, 'fr'), { recursive: true });
    writeFileSync(path.join(hbp, 'subject.ejs'), 'Welcome to Acme, <%= display_name %>');
    writeFileSync(
      path.join(hbp, 'html.ejs'),
      '<p>Hi <%= display_name %>,</p><a href="<%= url %>/auth/activate?ticket=<%= ticket %>">Activate</a>',
    );
    writeFileSync(path.join(hbp, 'fr', 'subject.ejs'), 'Bienvenue chez Acme, <%= display_name %>');
    const t = await buildMailApp('pglite', {
      AUTO_ACTIVATE_NEW_USERS: false,
      EMAIL_TEMPLATES_DIR: dir,
      REGISTRATION_CUSTOM_FIELDS: ['display_name'],
    });
    try {
      const reg = (email: string, extra: Record<string, unknown>) =>
        t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456', user_data: { display_name: 'Zoë' }, ...extra },
        });
      assert.equal((await reg('en@example.com', {})).statusCode, 200);
      const en = t.smtp.last('en@example.com');
      assert.equal(en.subject, 'Welcome to Acme, Zoë');
      assert.match(en.html, /<p>Hi Zoë,<\/p>/);
      const link = findLink(en.html, '/auth/activate');
      assert.equal(link.searchParams.get('ticket'), en.headers.get('x-ticket'));
      assert.equal(findLink(en.text, '/auth/activate').href, link.href, 'text part derived from the HTML');

      assert.equal((await reg('fr@example.com', { locale: 'fr-FR' })).statusCode, 200);
      const fr = t.smtp.last('fr@example.com');
      assert.equal(fr.subject, 'Bienvenue chez Acme, Zoë');
      assert.match(fr.html, /<p>Hi Zoë,<\/p>/, 'no fr/html.ejs: the template folder’s html.ejs');

      const bad = await reg('bad@example.com', { locale: '../../etc' });
      assert.equal(bad.statusCode, 400);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the newcomer path on embedded defaults (no SMTP_HOST: the outbox)', () => {
  for (const kind of dbKinds()) {
    it(`registers, finds the activation link in DATA_DIR/outbox, activates and logs in [${kind}]`, async () => {
      const t = await buildTestApp(kind, { AUTO_ACTIVATE_NEW_USERS: false, RATE_LIMIT_ENABLED: false });
      try {
        assert.equal(t.ctx.mailer.mode, 'outbox');
        const credentials = { email: 'newcomer@example.com', password: 'correct horse' };
        const reg = await t.app.inject({ method: 'POST', url: '/auth/register', payload: credentials });
        assert.equal(reg.statusCode, 200);
        // Delivered after the commit, by the sender of the durable outbox.
        await t.ctx.tasks.idle();
        const outbox = path.join(t.dataDir, 'outbox');
        const files = readdirSync(outbox).filter((f) => f.endsWith('.eml'));
        assert.equal(files.length, 1);
        const mail = await simpleParser(readFileSync(path.join(outbox, files[0] as string)));
        const link = findLink(mail.text ?? '', '/auth/activate');
        assert.equal(link.origin, 'http://localhost:3000', 'SERVER_URL default');
        const activated = await t.app.inject({ method: 'GET', url: pathOf(link) });
        assert.equal(activated.statusCode, 302, activated.body);
        assert.equal(
          activated.headers.location,
          'http://localhost:3000/console/?signed_in=true',
          'no REDIRECT_URL_SUCCESS: the development console, signed in by the cookies',
        );
        assert.ok(activated.cookies.some((c) => c.name === 'refresh_token'));
        const login = await t.app.inject({ method: 'POST', url: '/auth/login', payload: credentials });
        assert.equal(login.statusCode, 200, login.body);
        assert.ok(login.json().jwt_token);
      } finally {
        await t.close();
      }
    });
  }
});
