/**
 * Emails carry no attacker's text (issue 15, point 7). A display name is chosen by whoever registers,
 * and the email goes to the address, whose owner may not be that person: the name must not bring HTML,
 * extra lines or links into the message, whether the built-in templates or the operator's are used.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { USER_TEXT_MAX, userText } from '../../src/mail/templates.ts';
import { tempDir } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import type { CapturedMail } from '../helpers/smtp.ts';
import { buildMailApp, createAccount, type MailTestApp } from './fixtures.ts';

const EVIL_NAME =
  '<a href="http://evil.example/login">Your bank</a>\r\nBcc: victim@evil.example\n\u202Eevil.example www.evil.example ' +
  'x'.repeat(100);

/** Every URL or bare domain a mail client could turn into a link. */
const linkLike = (s: string) => s.match(/\b(?:https?:\/\/|www\.)[^\s<>"']+|\b[\w-]+\.example\b/gi) ?? [];

/** The mail shows none of the attacker's markup or links; its only link is the service's own. */
function assertNoAttackerText(mail: CapturedMail) {
  for (const part of [mail.html, mail.text, mail.subject]) {
    assert.ok(!part.includes('<a href="http://evil'), 'no markup from the name');
    assert.deepEqual(
      linkLike(part).filter((l) => l.includes('evil')),
      [],
      `no link-like text from the name in:\n${part}`,
    );
    assert.ok(!part.includes('\u202E'), 'no bidirectional override');
  }
  assert.equal((mail.html.match(/<a\b/g) ?? []).length, 1, 'one link: the action button');
  const hello = mail.text.split('\n').find((l) => l.startsWith('Hello ') || l.startsWith('Hi ')) as string;
  assert.ok(hello, mail.text);
  assert.match(hello, /Bcc:/, 'the whole name on the greeting line');
  assert.match(hello, /…/, 'cut short');
  assert.ok(
    Array.from(hello.replace(/\u200B/g, '')).length <= 'Hello ,'.length + USER_TEXT_MAX,
    `at most ${USER_TEXT_MAX} characters of the name: ${hello}`,
  );
  assert.equal(mail.raw.headers.get('bcc'), undefined, 'no header injected');
}

for (const kind of dbKinds()) {
  describe(`user-chosen text in emails [${kind}]`, () => {
    let t: MailTestApp;
    let templates: string;
    before(async () => {
      // An operator's magic-link template that prints the name raw (<%- %>) in HTML and in the subject.
      templates = tempDir();
      const dir = path.join(templates, 'magic-link');
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'subject.ejs'), 'Hi <%- display_name %>, your link');
      writeFileSync(
        path.join(dir, 'html.ejs'),
        '<p>Hi <%- display_name %>,</p><p>Also: <%= display_name %></p><p><a href="<%= link %>">Continue</a></p>',
      );
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        MAGIC_LINK_ENABLED: true,
        REGISTRATION_CUSTOM_FIELDS: ['display_name'],
        EMAIL_TEMPLATES_DIR: templates,
      });
    });
    after(async () => {
      await t.close();
      rmSync(templates, { recursive: true, force: true });
    });

    const register = async (payload: Record<string, unknown>) => {
      const res = await t.app.inject({ method: 'POST', url: '/auth/register', payload });
      assert.equal(res.statusCode, 200, res.body);
    };

    it('a display name cannot inject HTML, lines or links into an email (built-in template)', async () => {
      await register({
        email: 'target@example.com',
        password: 'pw-123456',
        user_data: { display_name: EVIL_NAME },
      });
      const mail = t.smtp.last('target@example.com');
      assertNoAttackerText(mail);
      assert.match(mail.html, /Hello &lt;a href=&quot;http:\u200B\/\u200B\/\u200Bevil\.\u200Bexample/);
    });

    it("a display name cannot inject HTML, lines or links into an email (operator's template printing it raw)", async () => {
      await register({ email: 'magic-target@example.com', user_data: { display_name: EVIL_NAME } });
      const mail = t.smtp.last('magic-target@example.com');
      assertNoAttackerText(mail);
      assert.match(mail.subject, /^Hi &?/);
      assert.ok(!mail.subject.includes('\n'));
      assert.ok(!mail.html.includes('<a href="http://evil'));
      assert.match(mail.html, /<p>Hi &lt;a href=/, '<%- %> prints the name escaped');
      assert.match(mail.html, /<p>Also: &lt;a href=/, '<%= %> escapes it once, not twice');
    });

    it('the owner’s own display name is shown safely in the "already have an account" email', async () => {
      await createAccount(t, { email: 'owner@example.com', password: 'owner-pw', displayName: EVIL_NAME });
      await register({ email: 'owner@example.com', password: 'pw-123456' });
      const mail = t.smtp.last('owner@example.com');
      assert.equal(mail.subject, 'You already have an account');
      assertNoAttackerText(mail);
    });
  });
}

describe('userText', () => {
  it('keeps ordinary names as they are', () => {
    assert.equal(userText('Zoë Ångström-O’Brien'), 'Zoë Ångström-O’Brien');
    assert.equal(userText('Dr. Who'), 'Dr. Who');
  });

  it('puts text on one line without control or bidirectional characters', () => {
    assert.equal(userText(' a\r\nb\tc\u0000d\u2028e\u202Ef '), 'a b c d ef');
  });

  it('cuts long text to USER_TEXT_MAX characters, ellipsis included, without splitting a character', () => {
    const out = userText('😀'.repeat(100));
    assert.equal(Array.from(out).length, USER_TEXT_MAX);
    assert.ok(out.endsWith('😀…'));
  });

  it('breaks what a mail client would turn into a link', () => {
    assert.equal(userText('http://evil.example'), 'http:\u200B/\u200B/\u200Bevil.\u200Bexample');
    assert.equal(userText('a@b.example'), 'a@\u200Bb.\u200Bexample');
  });
});
