/**
 * What a counter store offers, in a module of its own: the memory store (counters.ts) and the Redis one
 * (counters-redis.ts, loaded only with REDIS_URL) both implement it without importing each other.
 */
export interface Count {
  count: number;
  /** Milliseconds until the window ends. */
  resetInMs: number;
}

export interface CounterStore {
  /**
   * Adds one to `key` (starting a window of `windowMs` on the first hit) and returns the new count.
   * `slide`: every hit restarts the window, so the count is forgotten only after `windowMs` of quiet.
   */
  increment(key: string, windowMs: number, slide?: boolean): Promise<Count>;
  /** The current count of `key`, without counting. */
  peek(key: string): Promise<Count | undefined>;
  /** Takes back one hit of `key` (a count never goes below 0; the window is unchanged). */
  release(key: string): Promise<void>;
  reset(key: string): Promise<void>;
  close(): Promise<void>;
}
