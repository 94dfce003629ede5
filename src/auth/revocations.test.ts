import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RevokedList } from './revocations.ts';

const USER = '8f0f5a4e-1c2b-4d3e-8f9a-0b1c2d3e4f5a';
const SID = '5c1e2d3f-4a5b-4c6d-8e7f-8091a2b3c4d5';
const OTHER = '0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3';

describe('RevokedList', () => {
  it('refuses the tokens of an ended session and no other session of the user', () => {
    const list = new RevokedList();
    list.apply({ sessionIds: [SID], expiresAt: 2_000_000 });
    assert.equal(list.refuses(USER, SID, 1000), true);
    assert.equal(list.refuses(USER, OTHER, 1000), false);
    assert.equal(list.refuses(USER, undefined, 1000), false);
  });

  it("refuses a user's tokens issued at or before the instant, and not those issued in a later second", () => {
    const list = new RevokedList();
    // Revoked at 1000.500 s: a token of second 1000 may precede it (iat is whole seconds), so it goes.
    list.apply({ userId: USER, issuedBefore: 1_000_500, expiresAt: 2_000_000 });
    assert.equal(list.refuses(USER, SID, 999), true);
    assert.equal(list.refuses(USER, SID, 1000), true);
    assert.equal(list.refuses(USER, SID, 1001), false);
    assert.equal(list.refuses(OTHER, SID, 999), false);
    // A later revocation moves the instant forward, never back.
    list.apply({ userId: USER, issuedBefore: 900_000, expiresAt: 2_000_000 });
    assert.equal(list.refuses(USER, SID, 1000), true);
  });

  it('forgets entries once every token they refuse has expired', () => {
    const list = new RevokedList();
    list.apply({ sessionIds: [SID], expiresAt: 5_000 });
    list.apply({ userId: USER, issuedBefore: 1_000, expiresAt: 6_000 });
    assert.equal(list.size, 2);
    list.prune(5_000);
    assert.equal(list.size, 1);
    assert.equal(list.refuses(OTHER, SID, 0), false);
    list.prune(6_000);
    assert.equal(list.size, 0);
    assert.equal(list.refuses(USER, undefined, 0), false);
  });

  it('holds 10,000 ended sessions and still answers a lookup without scanning', () => {
    const list = new RevokedList();
    const ids = Array.from(
      { length: 10_000 },
      (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    list.apply({ sessionIds: ids, expiresAt: 2_000_000 });
    assert.equal(list.size, 10_000);
    const started = process.hrtime.bigint();
    let refused = 0;
    for (let i = 0; i < 100_000; i++) if (list.refuses(USER, ids[i % 10_000], 1000)) refused++;
    const perLookupNs = Number(process.hrtime.bigint() - started) / 100_000;
    assert.equal(refused, 100_000);
    // A map lookup is well under a microsecond; a scan of 10,000 entries would take far longer.
    assert.ok(perLookupNs < 5_000, `${perLookupNs} ns per lookup`);
  });
});
