/**
 * A FIFO limiter for image transforms. sharp runs on libuv's thread pool (4 threads by default), the
 * same pool that runs argon2 hashing and file I/O: letting every transform in at once would make
 * logins and downloads wait behind them. At most `concurrency` run; up to `maxWaiting` wait in order;
 * beyond that a transform is refused at once (503) instead of piling up source images in memory.
 */
import { AppError } from '../../errors.ts';

export class TransformQueue {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    readonly concurrency: number,
    readonly maxWaiting: number,
  ) {}

  /** Transforms running now and waiting for a turn. */
  get stats(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /** Runs `task` when a slot is free. Throws IMAGE_QUEUE_FULL (503) when too many already wait. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.maxWaiting)
        throw new AppError('IMAGE_QUEUE_FULL', undefined, { headers: { 'retry-after': '1' } });
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter, so `running` stays at the limit while work waits.
      if (next) next();
      else this.running--;
    }
  }
}
