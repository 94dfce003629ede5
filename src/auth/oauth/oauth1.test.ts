import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { oauth1Header, percentEncode } from './oauth1.ts';

describe('OAuth 1.0a signing', () => {
  it('percent-encodes as RFC 5849 §3.6 says (unreserved kept, the rest upper-case %XX)', () => {
    assert.equal(percentEncode("Ladies + Gentlemen!*'()~._-"), 'Ladies%20%2B%20Gentlemen%21%2A%27%28%29~._-');
    assert.equal(percentEncode('☃'), '%E2%98%83');
  });

  it("signs Twitter's documented example request with its documented signature", () => {
    const header = oauth1Header(
      'POST',
      'https://api.twitter.com/1.1/statuses/update.json?include_entities=true',
      {
        consumerKey: 'xvz1evFS4wEEPTGEFPHBog',
        consumerSecret: 'kAcSOqF21Fu85e7zjz7ZN2U4ZRhfV3WpwPAoE3Z7kBw',
        token: '370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb',
        tokenSecret: 'LswwdoUaIvS8ltyTt5jkRh4J50vUPVVHtR2YPi5kE',
      },
      { status: 'Hello Ladies + Gentlemen, a signed OAuth request!' },
      {},
      { nonce: 'kYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg', timestamp: 1318622958 },
    );
    assert.match(header, /^OAuth /);
    assert.match(header, /oauth_signature="hCtSmYh%2BiHYCEqBWrE7C7hYmtUk%3D"/);
  });
});
