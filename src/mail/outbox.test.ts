import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DeliveryError } from './mailer.ts';
import { describeError, retryDelay } from './outbox.ts';

describe('retryDelay', () => {
  const config = { EMAIL_RETRY_DELAY_MS: 10_000, EMAIL_RETRY_MAX_DELAY_MS: 900_000 };

  it('doubles from EMAIL_RETRY_DELAY_MS after each attempt, up to EMAIL_RETRY_MAX_DELAY_MS', () => {
    const mid = (n: number) => retryDelay(config, n, 0.5);
    assert.deepEqual([1, 2, 3, 4].map(mid), [10_000, 20_000, 40_000, 80_000]);
    assert.equal(mid(7), 640_000);
    assert.equal(mid(8), 900_000);
    assert.equal(mid(1000), 900_000, 'no overflow after many attempts');
  });

  it('spreads retries by ±20 %', () => {
    assert.equal(retryDelay(config, 1, 0), 8_000);
    assert.equal(retryDelay(config, 1, 1), 12_000);
  });
});

describe('describeError', () => {
  it('keeps the transport error code and first line, never the link or ticket of the message', () => {
    const ticket = '5f0c2b1e-7a44-4d3e-9f7c-0b9c3e2a1d55';
    const link = `http://gatehouse.test/auth/activate?ticket=${ticket}`;
    const cause = Object.assign(new Error(`Message failed: 554 rejected ${link}\nmore detail ${ticket}`), {
      code: 'EMESSAGE',
    });
    const text = describeError(new DeliveryError(cause), [link, ticket]);
    assert.equal(text, 'EMESSAGE: Message failed: 554 rejected [redacted]');
    assert.ok(!text.includes(ticket));
  });

  it('bounds the length', () => {
    assert.ok(describeError(new Error('x'.repeat(5000)), []).length <= 300);
  });
});
