/**
 * Counters behind the rate limits: fixed (or sliding) windows per key, in memory or in Redis (REDIS_URL)
 * so that several instances share them. Used by the request limits (rate-limit.ts) and the guess limits
 * (guesses.ts).
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';

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

export class MemoryStore implements CounterStore {
  private readonly counts = new Map<string, { count: number; resetAt: number }>();
  private readonly sweeper: NodeJS.Timeout;
  constructor(private readonly now: () => number = Date.now) {
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }
  private sweep(): void {
    const t = this.now();
    for (const [k, v] of this.counts) if (v.resetAt <= t) this.counts.delete(k);
  }
  async increment(key: string, windowMs: number, slide = false): Promise<Count> {
    const t = this.now();
    let e = this.counts.get(key);
    if (!e || e.resetAt <= t) {
      e = { count: 0, resetAt: t + windowMs };
      this.counts.set(key, e);
    }
    e.count += 1;
    if (slide) e.resetAt = t + windowMs;
    return { count: e.count, resetInMs: e.resetAt - t };
  }
  async peek(key: string): Promise<Count | undefined> {
    const t = this.now();
    const e = this.counts.get(key);
    return e && e.resetAt > t ? { count: e.count, resetInMs: e.resetAt - t } : undefined;
  }
  async release(key: string): Promise<void> {
    const e = this.counts.get(key);
    if (e && e.resetAt > this.now() && e.count > 0) e.count -= 1;
  }
  async reset(key: string): Promise<void> {
    this.counts.delete(key);
  }
  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}

// INCR and the expiry of a new window in one atomic step, so instances never disagree on the window.
// ARGV[2] = '1' restarts the window on every hit (a sliding one).
const INCREMENT = `
local c = redis.call('INCR', KEYS[1])
if c == 1 or ARGV[2] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {c, ttl}`;

const RELEASE = `
local c = tonumber(redis.call('GET', KEYS[1]))
if c and c > 0 then redis.call('DECR', KEYS[1]) end
return 0`;

export class RedisStore implements CounterStore {
  private readonly redis: Redis;
  constructor(
    url: string,
    private readonly prefix = 'gatehouse:rl:',
  ) {
    this.redis = new Redis(url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
    // Connection problems surface as failed commands (handled by the caller); don't crash on the event.
    this.redis.on('error', () => {});
  }
  async increment(key: string, windowMs: number, slide = false): Promise<Count> {
    const [count, ttl] = (await this.redis.eval(
      INCREMENT,
      1,
      this.prefix + key,
      String(windowMs),
      slide ? '1' : '0',
    )) as [number, number];
    return { count, resetInMs: ttl };
  }
  async peek(key: string): Promise<Count | undefined> {
    const [v, ttl] = await Promise.all([
      this.redis.get(this.prefix + key),
      this.redis.pttl(this.prefix + key),
    ]);
    return v === null ? undefined : { count: Number(v), resetInMs: Math.max(0, ttl) };
  }
  async release(key: string): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.prefix + key);
  }
  async reset(key: string): Promise<void> {
    await this.redis.del(this.prefix + key);
  }
  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

/** A key part for an email: hashed, so the counters hold no addresses. */
export function emailKey(email: string): string {
  return createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32);
}
