/**
 * The one matcher of redirect targets, CORS origins and CSRF origins: a `*` stands only for characters
 * of the component it sits in, and candidates are judged on what a browser would parse them as.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { originMatcher, parseUrlPattern, urlMatcher } from './url-patterns.ts';

/** Look-alikes of a subdomain of example.com that a browser would take to evil.com (or nowhere). */
const LOOK_ALIKES = [
  'https://evil.com/.example.com',
  'https://evil.com/.example.com/steal',
  'https://evil.com?.example.com',
  'https://evil.com#.example.com',
  'https://example.com.evil.com/x',
  'https://a.example.com.evil.com/x',
  'https://good.example.com@evil.com/x',
  'https://good.example.com:pw@evil.com/x',
  'https://evil.com\\.example.com',
  'https:\\\\evil.com\\.example.com',
  'https://evil.com%2f.example.com',
  'https://evil.com%2F.example.com/x',
  'https://evil.com%5c.example.com',
  'https://evil.com%3f.example.com',
  'https://evil.com%40.example.com',
  'https://a.example.com./x',
  'https://evilexample.com/x',
  'https://example.com/x',
  'http://a.example.com/x',
  'javascript://a.example.com/%0aalert(1)',
  'https://a_b.example.com/x',
];

describe('URL patterns', () => {
  const redirect = urlMatcher([
    'https://*.example.com/*',
    'http://localhost:*',
    'https://app.example.org/auth/*',
    'https://pr-*.preview.example.net',
    'https://bücher.example.de',
  ]);

  for (const target of LOOK_ALIKES) {
    it(`a * in a pattern does not reach across components: refuses ${target}`, () =>
      assert.equal(redirect(target), false));
  }

  const allowed = [
    'https://a.example.com/x',
    'https://a.b.example.com/cb',
    'https://A.EXAMPLE.COM/x',
    'https://a.example.com:443/x',
    'http://localhost:5173/cb',
    'http://localhost/cb',
    'http://LOCALHOST:3000/',
    'https://app.example.org/auth/callback?next=/x#f',
    'https://app.example.org/auth/cb/deeper',
    'https://pr-12.preview.example.net/any',
    'https://xn--bcher-kva.example.de/',
    'https://bücher.example.de/',
  ];
  for (const target of allowed) {
    it(`accepts ${target}`, () => assert.equal(redirect(target), true));
  }

  it('a * in a path stays in the path: the query cannot supply the allowed path', () => {
    assert.equal(redirect('https://app.example.org/other?/auth/x'), false);
    assert.equal(redirect('https://app.example.org/other#/auth/x'), false);
    assert.equal(redirect('https://app.example.org/auth'), false);
    assert.equal(redirect('https://app.example.org/x/../auth/cb'), true, 'dot segments resolved first');
  });

  it('a * inside a label stays in that label', () => {
    assert.equal(redirect('https://pr-1.evil.preview.example.net/'), false);
    assert.equal(redirect('https://pr-.preview.example.net/'), true);
    assert.equal(redirect('https://x.pr-1.preview.example.net/'), false);
  });

  it('matches origins exactly as browsers serialise them, paths of entries aside', () => {
    const origin = originMatcher(['https://*.example.com/welcome/*', 'http://localhost:*']);
    assert.equal(origin('https://a.example.com'), true);
    assert.equal(origin('https://a.b.example.com'), true);
    assert.equal(origin('http://localhost:5173'), true);
    for (const o of [
      'https://a.example.com/',
      'https://A.example.com',
      'https://a.example.com:443',
      'https://evil.com/.example.com',
      'https://evil.com?.example.com',
      'https://example.com.evil.com',
      'https://x@a.example.com',
      'null',
      'https://example.com',
    ])
      assert.equal(origin(o), false, o);
  });

  it('refuses patterns that would cover a top-level domain or are not URLs', () => {
    for (const bad of [
      '*',
      'https://*',
      'https://*.com',
      'https://*.example-*.com',
      'https://a.*',
      'app.example.com',
      'ftp://x.example.com',
      'https://u@x.example.com',
      'https://x.example.com/?q=*',
      'https://x.example.com:99999',
      'https://evil.com%2f.example.com',
    ])
      assert.equal(typeof parseUrlPattern(bad), 'string', bad);
    for (const good of [
      'https://app.example.com',
      'https://app.example.com/',
      'https://*.example.com/*',
      'http://localhost:*',
      'http://127.0.0.1:8080',
      'http://[::1]:*',
    ])
      assert.equal(typeof parseUrlPattern(good), 'object', good);
  });
});
