import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configFrom } from '../config.ts';
import { redirectAllowed } from './redirects.ts';

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
    // `:*` is any port, the default included (`http://localhost` is `http://localhost:80`).
    ['http://localhost/cb', true],
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
