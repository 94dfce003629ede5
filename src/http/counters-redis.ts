/**
 * The Redis counter store (REDIS_URL), in a module of its own so that ioredis is loaded only by an
 * instance that uses it.
 */
import { Redis } from 'ioredis';
import type { Count, CounterStore } from './counter-store.ts';

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

/** How long a Redis command may take before it counts as failed: a request must never hang on Redis. */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;

export class RedisStore implements CounterStore {
  private readonly redis: Redis;
  constructor(
    url: string,
    private readonly prefix = 'gatehouse:rl:',
  ) {
    this.redis = new Redis(url, {
      // While disconnected a command fails at once (and the failure policy decides) instead of queueing
      // until Redis returns, which would hold every request for as long; ioredis keeps reconnecting.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // A connected Redis that stopped answering (a host gone, a network partition).
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      enableAutoPipelining: true,
    });
    // Connection problems surface as failed commands (handled by the caller); don't crash on the event.
    this.redis.on('error', () => {});
  }
  /** Resolves once connected, or after `timeoutMs` (a Redis down at start does not hold the start). */
  async connected(timeoutMs: number): Promise<boolean> {
    if (this.redis.status === 'ready') return true;
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.redis.once('ready', onReady);
    });
  }
  async ping(): Promise<void> {
    await this.redis.ping();
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
