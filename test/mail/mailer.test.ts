import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { configFrom } from '../../src/config.ts';
import { AppError } from '../../src/errors.ts';
import { createMailer, DeliveryError } from '../../src/mail/mailer.ts';
import { renderTemplate, TEMPLATE_NAMES } from '../../src/mail/templates.ts';
import { tempDir } from '../helpers/app.ts';
import { findLink, startSmtp, type TestSmtp } from '../helpers/smtp.ts';

function captureLog(): { log: FastifyBaseLogger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink) as unknown as FastifyBaseLogger, lines };
}

const silent = pino({ level: 'silent' }) as unknown as FastifyBaseLogger;
const locals = {
  display_name: 'Ada <Lovelace>',
  email: 'ada@example.com',
  url: 'http://localhost:3000',
  link: 'http://localhost:3000/auth/activate?ticket=t-123',
  ticket: 't-123',
};

describe('mailer over SMTP', () => {
  let smtp: TestSmtp;
  let dir: string;
  before(async () => {
    smtp = await startSmtp();
    dir = tempDir();
  });
  after(async () => {
    await smtp.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const config = () =>
    configFrom({
      DATA_DIR: dir,
      CUSTOM_DIR: path.join(dir, 'custom'),
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: smtp.port,
      SMTP_SENDER: 'Gatehouse <no-reply@example.com>',
      SMTP_TIMEOUT_MS: 2000,
    });

  it('delivers every template with a text part and an HTML part that both carry the action link', async () => {
    const mailer = createMailer(config(), { log: silent });
    assert.equal(mailer.mode, 'smtp');
    for (const template of TEMPLATE_NAMES) {
      const to = `${template}@example.com`;
      const link = `http://localhost:3000/${template}?ticket=abc`;
      await mailer.deliver({ to, template, locals: { ...locals, link }, headers: { 'X-Ticket': 'abc' } });
      const m = smtp.last(to);
      assert.ok(m.subject.length > 0, template);
      assert.equal(findLink(m.text, `/${template}`).href, link);
      assert.equal(findLink(m.html, `/${template}`).href, link);
      assert.equal(m.headers.get('x-ticket'), 'abc');
      assert.match(m.raw.from?.text ?? '', /no-reply@example\.com/);
    }
    await mailer.close();
  });

  it('escapes locals in the built-in HTML', async () => {
    const r = renderTemplate('/nonexistent', 'activate-account', locals);
    assert.match(r.html, /Hello Ada &lt;Lovelace&gt;/);
    assert.match(r.text, /Hello Ada <Lovelace>/);
  });

  it('rejects with a DeliveryError when the server refuses the recipient', async () => {
    const mailer = createMailer(config(), { log: silent });
    smtp.refuse = true;
    try {
      await assert.rejects(
        mailer.deliver({ to: 'x@example.com', template: 'lost-password', locals }),
        (e: unknown) => e instanceof DeliveryError && /550/.test(String((e.cause as Error).message)),
      );
    } finally {
      smtp.refuse = false;
      await mailer.close();
    }
  });

  it('rejects with a DeliveryError when the server is down', async () => {
    const mailer = createMailer(config(), { log: silent });
    await smtp.stop();
    try {
      await assert.rejects(
        mailer.deliver({ to: 'x@example.com', template: 'lost-password', locals }),
        (e: unknown) => e instanceof DeliveryError && (e.cause as { code?: string }).code === 'ESOCKET',
      );
    } finally {
      await smtp.start();
      await mailer.close();
    }
    const again = createMailer(config(), { log: silent });
    await again.deliver({ to: 'back@example.com', template: 'lost-password', locals });
    assert.equal(smtp.to('back@example.com').length, 1);
    await again.close();
  });
});

describe('mailer outbox (no SMTP_HOST outside production)', () => {
  it('writes one .eml per message into DATA_DIR/outbox and logs the action link', async () => {
    const dir = tempDir();
    try {
      const { log, lines } = captureLog();
      const mailer = createMailer(configFrom({ DATA_DIR: dir, CUSTOM_DIR: path.join(dir, 'custom') }), {
        log,
      });
      assert.equal(mailer.mode, 'outbox');
      await mailer.deliver({
        to: 'ada@example.com',
        template: 'activate-account',
        locals,
        headers: { 'X-Ticket': 't-123' },
      });
      const files = readdirSync(path.join(dir, 'outbox')).sort();
      assert.equal(files.length, 3, 'the message, its entry for the console and its plain text');
      assert.match(files[0] as string, /activate-account.*\.eml$/);
      assert.equal(files[1], (files[0] as string).replace(/\.eml$/, '.json'));
      assert.equal(files[2], (files[0] as string).replace(/\.eml$/, '.txt'));
      const entry = JSON.parse(readFileSync(path.join(dir, 'outbox', files[1] as string), 'utf8'));
      assert.equal(entry.to, 'ada@example.com');
      assert.equal(entry.link, locals.link);
      const eml = readFileSync(path.join(dir, 'outbox', files[0] as string), 'utf8');
      assert.match(eml, /^X-Ticket: t-123$/m);
      assert.match(eml, /^To: ada@example\.com$/m);
      assert.match(eml, /Content-Type: text\/plain/);
      assert.match(eml, /Content-Type: text\/html/);
      const line = lines.find((l) => l.link === locals.link);
      assert.ok(line, 'a log line carries the link');
      assert.match(String(line.msg), /auth\/activate\?ticket=t-123/);
      await mailer.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes a plain-text copy in which grep finds a long link whole (the .eml is quoted-printable)', async () => {
    const dir = tempDir();
    try {
      const mailer = createMailer(configFrom({ DATA_DIR: dir, CUSTOM_DIR: path.join(dir, 'custom') }), {
        log: silent,
      });
      const link = `http://localhost:3000/auth/activate?ticket=${'a1b2c3d4-'.repeat(8)}end&redirect=somewhere`;
      await mailer.deliver({
        to: 'ada@example.com',
        template: 'activate-account',
        locals: { ...locals, link },
      });
      await mailer.close();
      const outbox = path.join(dir, 'outbox');
      const read = (ext: string) =>
        readFileSync(path.join(outbox, readdirSync(outbox).find((n) => n.endsWith(ext)) as string), 'utf8');
      assert.ok(!read('.eml').includes(link), 'the .eml wraps the link (which is why the .txt exists)');
      const text = read('.txt');
      assert.match(text, /^To: ada@example\.com$/m);
      assert.ok(text.split('\n').includes(`Link: ${link}`), 'grep finds the link on a line of its own');
      assert.ok(text.split('\n').slice(3).join('\n').includes(link), 'and in the body');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start in production without SMTP_HOST when emails are on, with the other settings', () => {
    assert.throws(
      () =>
        configFrom({
          NODE_ENV: 'production',
          EMAILS_ENABLED: true,
          DATABASE_URL: 'postgres://x@localhost/x',
          COOKIE_SECRET: 'x'.repeat(32),
          MFA_ENABLED: false,
          JWT_ALGORITHM: 'HS256',
          JWT_KEY: 'k'.repeat(32),
        }),
      /- SMTP_HOST is required in production when EMAILS_ENABLED is true/,
    );
  });

  it('refuses every send with EMAILS_DISABLED when EMAILS_ENABLED is false', async () => {
    const mailer = createMailer(configFrom({ EMAILS_ENABLED: false }), { log: silent });
    assert.equal(mailer.mode, 'disabled');
    assert.equal(mailer.sends, false);
    await assert.rejects(
      mailer.deliver({ to: 'a@example.com', template: 'magic-link', locals }),
      (e: unknown) => e instanceof AppError && e.code === 'EMAILS_DISABLED',
    );
  });
});

describe('template overrides from EMAIL_TEMPLATES_DIR', () => {
  let root: string;
  before(() => {
    root = tempDir();
    // Laid out exactly like an HBP deployment's custom/emails folder: subject.ejs and html.ejs only.
    const hbp = path.join(root, 'activate-account');
    mkdirSync(hbp, { recursive: true });
    writeFileSync(path.join(hbp, 'subject.ejs'), 'Welcome <%= display_name %>\n');
    writeFileSync(
      path.join(hbp, 'html.ejs'),
      '<h2>Hello <%= display_name %></h2>\n<p><a href="<%= url %>/auth/activate?ticket=<%= ticket %>">Activate</a></p>\n',
    );
    const ml = path.join(root, 'magic-link');
    mkdirSync(path.join(ml, 'fr'), { recursive: true });
    writeFileSync(path.join(ml, 'subject.ejs'), 'Secure <%= action %> link');
    writeFileSync(path.join(ml, 'fr', 'subject.ejs'), 'Lien sécurisé');
    writeFileSync(path.join(ml, 'fr', 'text.ejs'), 'Bonjour <%= display_name %> : <%- link %>');
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('renders an HBP-style subject.ejs and html.ejs with their variables and derives the text part', () => {
    const r = renderTemplate(root, 'activate-account', locals);
    assert.equal(r.subject, 'Welcome Ada <Lovelace>', 'no HTML escapes in a subject');
    assert.match(r.html, /<h2>Hello Ada &lt;Lovelace&gt;<\/h2>/);
    assert.match(r.html, /href="http:\/\/localhost:3000\/auth\/activate\?ticket=t-123"/);
    assert.match(r.text, /Hello Ada <Lovelace>/);
    assert.match(r.text, /Activate \(http:\/\/localhost:3000\/auth\/activate\?ticket=t-123\)/);
  });

  it('uses the locale folder first, then the template folder, then the built-in text, file by file', () => {
    const fr = renderTemplate(root, 'magic-link', { ...locals, action: 'log in', locale: 'fr-CA' });
    assert.equal(fr.subject, 'Lien sécurisé');
    assert.equal(fr.text, `Bonjour Ada <Lovelace> : ${locals.link}`);
    assert.match(fr.html, /Hello Ada &lt;Lovelace&gt;/, 'no html.ejs anywhere: built-in HTML');
    const en = renderTemplate(root, 'magic-link', { ...locals, action: 'log in', locale: 'en' });
    assert.equal(en.subject, 'Secure log in link');
  });

  it('ignores a locale that is not a plain language tag', () => {
    const r = renderTemplate(root, 'magic-link', { ...locals, action: 'log in', locale: '../magic-link/fr' });
    assert.equal(r.subject, 'Secure log in link');
  });

  it('ignores a template folder of another name (built-in text used)', () => {
    const r = renderTemplate(root, 'lost-password', locals);
    assert.equal(r.subject, 'Reset your password');
  });
});
