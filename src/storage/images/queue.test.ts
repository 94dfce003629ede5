import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../errors.ts';
import { TransformQueue } from './queue.ts';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('transform queue', () => {
  it('runs at most `concurrency` tasks at once and the rest in arrival order', async () => {
    const q = new TransformQueue(2, 10);
    const gates = [deferred(), deferred(), deferred(), deferred()];
    const started: number[] = [];
    let peak = 0;
    let running = 0;
    const runs = gates.map((g, i) =>
      q.run(async () => {
        started.push(i);
        running++;
        peak = Math.max(peak, running);
        await g.promise;
        running--;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1]);
    assert.deepEqual(q.stats, { running: 2, waiting: 2 });
    gates[1]?.resolve();
    await runs[1];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1, 2]);
    for (const g of gates) g.resolve();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2, 3]);
    assert.equal(peak, 2);
    assert.deepEqual(q.stats, { running: 0, waiting: 0 });
  });

  it('frees the slot when a task fails', async () => {
    const q = new TransformQueue(1, 10);
    await assert.rejects(
      q.run(async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await q.run(async () => 'next'), 'next');
    assert.deepEqual(q.stats, { running: 0, waiting: 0 });
  });

  it('refuses with 503 and Retry-After when the waiting line is full', async () => {
    const q = new TransformQueue(1, 1);
    const gate = deferred();
    const first = q.run(() => gate.promise);
    const second = q.run(async () => 'second');
    await assert.rejects(
      q.run(async () => 'third'),
      (err: unknown) =>
        err instanceof AppError &&
        err.statusCode === 503 &&
        err.code === 'IMAGE_QUEUE_FULL' &&
        err.headers['retry-after'] === '1',
    );
    gate.resolve();
    await first;
    assert.equal(await second, 'second');
  });
});
