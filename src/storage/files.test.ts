/**
 * The memory of rows seen (RowPresence): what the hot read path skips the table on. Pure logic; the
 * HTTP behaviour (a file deleted, or its row removed around the service, stops being served) is in
 * test/storage/files-table.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RowPresence } from './files.ts';

describe('RowPresence', () => {
  const clock = () => {
    let t = 1000;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  };

  it('remembers a row seen for its time to live, then asks again', () => {
    const c = clock();
    const p = new RowPresence(2000, 10, c.now);
    assert.equal(p.has('a'), false);
    p.remember('a', p.begin());
    assert.equal(p.has('a'), true);
    c.advance(1999);
    assert.equal(p.has('a'), true);
    c.advance(1);
    assert.equal(p.has('a'), false);
  });

  it('a lookup under way while a row was removed is not remembered (a read racing a delete)', () => {
    const p = new RowPresence(2000, 10, clock().now);
    const epoch = p.begin();
    p.forget('a');
    p.remember('a', epoch);
    assert.equal(p.has('a'), false);
    p.remember('a', p.begin());
    assert.equal(p.has('a'), true);
    p.forget('a');
    assert.equal(p.has('a'), false);
  });

  it('keeps at most its maximum, dropping the oldest first', () => {
    const p = new RowPresence(2000, 3, clock().now);
    for (const k of ['a', 'b', 'c']) p.remember(k, p.begin());
    p.remember('a', p.begin()); // seen again: now the newest
    p.remember('d', p.begin());
    assert.deepEqual(
      ['a', 'b', 'c', 'd'].map((k) => p.has(k)),
      [true, false, true, true],
    );
  });
});
