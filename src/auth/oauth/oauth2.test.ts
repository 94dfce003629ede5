import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pkceChallenge, randomValue, withQuery } from './oauth2.ts';

describe('OAuth 2.0 client pieces', () => {
  it('computes the S256 challenge of RFC 7636 appendix B', () => {
    assert.equal(
      pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'),
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    );
  });

  it('makes 256-bit random values that never repeat', () => {
    const seen = new Set(Array.from({ length: 100 }, () => randomValue()));
    assert.equal(seen.size, 100);
    for (const v of seen) assert.match(v, /^[A-Za-z0-9_-]{43}$/);
  });

  it("adds parameters to an endpoint and keeps the endpoint's own query", () => {
    const u = new URL(
      withQuery('https://idp.example/authorize?tenant=a', { state: 's&t', nonce: undefined }),
    );
    assert.equal(u.searchParams.get('tenant'), 'a');
    assert.equal(u.searchParams.get('state'), 's&t');
    assert.equal(u.searchParams.has('nonce'), false);
  });
});
