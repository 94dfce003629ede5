import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deviceKey, networkPrefix, userAgentFamily } from './new-device.ts';

describe('the device of a sign-in', () => {
  it('names the browser family without its version', () => {
    const ff = (v: string) => `Mozilla/5.0 (X11; Linux x86_64; rv:${v}) Gecko/20100101 Firefox/${v}`;
    assert.equal(userAgentFamily(ff('120.0')), 'Firefox on Linux');
    assert.equal(userAgentFamily(ff('121.0')), userAgentFamily(ff('120.0')));
    assert.equal(
      userAgentFamily(
        'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Edg/120.0',
      ),
      'Edge on Windows',
    );
    assert.equal(
      userAgentFamily(
        'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
      ),
      'Safari on iOS',
    );
    assert.equal(userAgentFamily('curl/8.4.0'), 'curl');
    assert.equal(userAgentFamily(null), 'unknown');
    // The header is the client's text: only a short plain name is kept.
    assert.equal(userAgentFamily('<script>alert(1)</script>'), 'unknown');
    assert.ok(userAgentFamily(`A${'b'.repeat(500)}`).length <= 40);
  });

  it('takes the /24 of IPv4 and the /48 of IPv6, mapped addresses as IPv4', () => {
    assert.equal(networkPrefix('203.0.113.77'), '203.0.113.0/24');
    assert.equal(networkPrefix('::ffff:203.0.113.9'), '203.0.113.0/24');
    assert.equal(networkPrefix('2001:db8:abcd:12::1'), '2001:db8:abcd::/48');
    assert.equal(networkPrefix('2001:0db8:abcd:0099:0000::7'), '2001:db8:abcd::/48');
    assert.equal(networkPrefix('::1'), '0:0:0::/48');
    assert.equal(networkPrefix(null), 'unknown');
  });

  it('sees one device across addresses of a network and browser updates, another across networks', () => {
    const a = deviceKey({ ip: '198.51.100.4', userAgent: 'Mozilla/5.0 (X11; Linux) Firefox/120.0' });
    const b = deviceKey({ ip: '198.51.100.200', userAgent: 'Mozilla/5.0 (X11; Linux) Firefox/125.0' });
    const c = deviceKey({ ip: '198.51.101.4', userAgent: 'Mozilla/5.0 (X11; Linux) Firefox/120.0' });
    assert.equal(a, b);
    assert.notEqual(a, c);
  });
});
