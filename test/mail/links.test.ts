import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { redirectAllowed } from '../../src/auth/redirects.ts';
import { configFrom } from '../../src/config.ts';
import { htmlToText } from '../../src/mail/html-to-text.ts';
import { appLink, withParams } from '../../src/mail/links.ts';

describe('redirect_to allow-list', () => {
  const config = configFrom({
    ALLOWED_REDIRECT_URLS: [
      'https://app.example.com',
      'https://*.example.org/',
      'http://localhost:*',
      'https://x.test/auth/*',
    ],
  });
  const cases: [string, boolean][] = [
    ['https://app.example.com', true],
    ['https://app.example.com/any/page?x=1#f', true],
    ['https://APP.example.com/', true],
    ['http://app.example.com/', false],
    ['https://app.example.com.evil.test/', false],
    ['https://evil.test/?https://app.example.com', false],
    ['https://app.example.com@evil.test/', false],
    ['https://user:pw@app.example.com/', false],
    ['https://a.example.org/cb', true],
    ['https://a.b.example.org/cb', true],
    ['https://example.org/cb', false],
    ['https://evilexample.org/', false],
    ['http://localhost:5173/cb', true],
    ['http://localhost/cb', false],
    ['https://x.test/auth/callback', true],
    ['https://x.test/other', false],
    ['javascript:alert(1)', false],
    ['/relative/path', false],
    ['not a url', false],
  ];
  for (const [target, ok] of cases) {
    it(`${ok ? 'accepts' : 'refuses'} ${target}`, () => assert.equal(redirectAllowed(config, target), ok));
  }
  it('refuses everything when ALLOWED_REDIRECT_URLS is empty', () => {
    assert.equal(redirectAllowed(configFrom({}), 'http://localhost:3000/'), false);
  });
});

describe('links', () => {
  it('adds parameters after an existing query and before a fragment', () => {
    assert.equal(
      withParams('https://a.test/p?x=1#top', { ticket: 'a b' }),
      'https://a.test/p?x=1&ticket=a+b#top',
    );
    assert.equal(withParams('https://a.test/p', { t: '1' }), 'https://a.test/p?t=1');
  });
  it('links app pages to redirect_to, else REDIRECT_URL_SUCCESS, else SERVER_URL', () => {
    const params = { ticket: 't', type: 'password-reset' as const };
    assert.equal(
      appLink(configFrom({ SERVER_URL: 'http://s.test' }), undefined, params),
      'http://s.test?ticket=t&type=password-reset',
    );
    const c = configFrom({ SERVER_URL: 'http://s.test', REDIRECT_URL_SUCCESS: 'http://app.test/in' });
    assert.equal(appLink(c, undefined, params), 'http://app.test/in?ticket=t&type=password-reset');
    assert.equal(
      appLink(c, 'http://other.test/r', params),
      'http://other.test/r?ticket=t&type=password-reset',
    );
  });
});

describe('htmlToText', () => {
  it('keeps paragraphs and writes links as label (url)', () => {
    const text = htmlToText(
      '<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Hi &amp; welcome</h1><p>Click <a href="https://a.test/x?a=1&amp;b=2">here</a>.</p><p>Or <a href="https://a.test/y">https://a.test/y</a><br>Bye</p></body></html>',
    );
    assert.equal(
      text,
      'Hi & welcome\n\nClick here (https://a.test/x?a=1&b=2).\n\nOr https://a.test/y\nBye\n',
    );
  });
});
