import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { backgroundTasks } from './background.ts';

describe('background tasks', () => {
  it('run a periodic task every interval until stopped, and idle() waits for a running one', async () => {
    const tasks = backgroundTasks(pino({ level: 'silent' }));
    let runs = 0;
    tasks.every('tick', 20, async () => {
      runs++;
      await new Promise((r) => setTimeout(r, 5));
    });
    await new Promise((r) => setTimeout(r, 110));
    tasks.stop();
    await tasks.idle();
    const seen = runs;
    assert.ok(seen >= 2, `ran ${seen} times`);
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(runs, seen);
  });
});
