import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientKey } from './guesses.ts';

describe('clientKey', () => {
  it('keeps an IPv4 address whole, also when mapped into IPv6', () => {
    assert.equal(clientKey('203.0.113.7'), '203.0.113.7');
    assert.equal(clientKey('::ffff:203.0.113.7'), '203.0.113.7');
  });

  it('counts an IPv6 client by its /64, however the address is written', () => {
    const key = '2001:db8:1:2::/64';
    assert.equal(clientKey('2001:db8:1:2:3:4:5:6'), key);
    assert.equal(clientKey('2001:0db8:0001:0002::9'), key);
    assert.equal(clientKey('2001:DB8:1:2:ffff::'), key);
    assert.notEqual(clientKey('2001:db8:1:3::1'), key);
    assert.equal(clientKey('::1'), '0:0:0:0::/64');
    assert.equal(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  });
});
