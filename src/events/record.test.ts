import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventId } from './record.ts';

describe('event ids', () => {
  it('are UUIDs of version 7 that sort in the order they were made, within a millisecond too', () => {
    const at = Date.parse('2026-01-01T00:00:00Z');
    const ids = Array.from({ length: 5000 }, (_, i) => eventId(at + Math.floor(i / 1000)));
    for (const id of ids)
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual([...ids].sort(), ids);
    assert.equal(new Set(ids).size, ids.length);
    // A clock that goes back does not make ids go back.
    const later = eventId(at - 60_000);
    assert.ok(later > (ids.at(-1) as string));
  });
});
