/**
 * Renders that failed, remembered for a while so that asking again answers at once with the same 4xx
 * instead of paying for the same refusal again (a request that ran into IMAGE_TIMEOUT would otherwise
 * hold a render process for the whole limit every time). Bounded in entries (the least recently used go
 * first) and in time: a failure caused by load rather than by the input is forgotten after `ttlMs`.
 */
import { AppError, type ErrorCode } from '../../errors.ts';

interface Failure {
  code: ErrorCode;
  message: string;
  until: number;
}

export class FailureMemory {
  private readonly entries = new Map<string, Failure>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Keeps `err` for `key` when it is the input's fault (415, 422); other errors are not remembered. */
  remember(key: string, err: unknown): void {
    if (this.ttlMs <= 0 || !(err instanceof AppError)) return;
    if (err.statusCode !== 415 && err.statusCode !== 422) return;
    this.entries.delete(key);
    this.entries.set(key, { code: err.code, message: err.message, until: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** The remembered failure of `key` as a fresh error to throw, or undefined. */
  recall(key: string): AppError | undefined {
    const f = this.entries.get(key);
    if (!f) return undefined;
    if (f.until <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    // Most recently used last, so that eviction takes the entry asked for longest ago.
    this.entries.delete(key);
    this.entries.set(key, f);
    return new AppError(f.code, f.message);
  }

  /** Forgets every failure of a source that was overwritten or deleted (keys start with its key). */
  forget(prefix: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}
