/**
 * Rate limits: fixed-window counters per key, in memory or in Redis (REDIS_URL) so that several instances
 * share them. The global limit (MAX_REQUESTS per TIME_FRAME per client IP, health routes excepted) runs on
 * every request; routes add tighter limits through `app.limiter` (login, register and token refresh per
 * IP, emails per address) and limit credential guesses through `app.guesses` (guesses.ts). Over a limit:
 * 429 with `Retry-After`. RATE_LIMIT_ENABLED=false turns everything off.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { type GuessLimiter, makeGuessLimiter } from './guesses.ts';

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

export interface Limiter {
  readonly enabled: boolean;
  /** Counts one hit on `key`; 429 when the count goes over `max` in the window. */
  consume(key: string, max: number, windowMs: number): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    limiter: Limiter;
    /** Limits on credential guesses (wrong passwords, wrong admin secrets): see guesses.ts. */
    guesses: GuessLimiter;
  }
}

function tooMany(resetInMs: number): AppError {
  return new AppError('RATE_LIMITED', undefined, {
    headers: { 'retry-after': String(Math.max(1, Math.ceil(resetInMs / 1000))) },
  });
}

/** A key part for an email: hashed, so the counters hold no addresses. */
export function emailKey(email: string): string {
  return createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32);
}

type Safely = <T>(what: () => Promise<T>) => Promise<T | undefined>;

/** A broken counter store must not take sign-in down with it: the limit is skipped and logged. */
function safelyWith(log: FastifyInstance['log']): Safely {
  return async (what) => {
    try {
      return await what();
    } catch (err) {
      log.warn({ err }, 'rate-limit store unavailable; request not limited');
      return undefined;
    }
  };
}

function makeLimiter(store: CounterStore | undefined, safely: Safely): Limiter {
  if (!store) {
    return {
      enabled: false,
      consume: async () => {},
    };
  }
  return {
    enabled: true,
    async consume(key, max, windowMs) {
      const c = await safely(() => store.increment(key, windowMs));
      if (c && c.count > max) throw tooMany(c.resetInMs);
    },
  };
}

const UNLIMITED = new Set(['/health', '/healthz', '/health/ready']);

function pathOf(request: FastifyRequest): string {
  const q = request.url.indexOf('?');
  return q === -1 ? request.url : request.url.slice(0, q);
}

export const rateLimitPlugin = fp(
  async (app: FastifyInstance, opts: { ctx: AppContext; store?: CounterStore }) => {
    const { config } = opts.ctx;
    let store: CounterStore | undefined;
    if (config.RATE_LIMIT_ENABLED) {
      store =
        opts.store ??
        (config.REDIS_URL
          ? new RedisStore(config.REDIS_URL)
          : new MemoryStore(() => opts.ctx.clock.now().getTime()));
      const owned = !opts.store;
      app.addHook('onClose', async () => {
        if (owned) await store?.close();
      });
    }
    const safely = safelyWith(app.log);
    app.decorate('limiter', makeLimiter(store, safely));
    app.decorate('guesses', makeGuessLimiter(store, config, safely));
    if (!store) return;
    const s = store;
    app.addHook('onRequest', async (request, reply) => {
      if (
        UNLIMITED.has(pathOf(request)) ||
        (request.routeOptions.config as { rateLimit?: unknown } | undefined)?.rateLimit === false
      )
        return;
      let c: Count | undefined;
      try {
        c = await s.increment(`global:${request.ip}`, config.TIME_FRAME);
      } catch (err) {
        request.log.warn({ err }, 'rate-limit store unavailable; request not limited');
        return;
      }
      reply.header('x-ratelimit-limit', config.MAX_REQUESTS);
      reply.header('x-ratelimit-remaining', Math.max(0, config.MAX_REQUESTS - c.count));
      reply.header('x-ratelimit-reset', Math.ceil(c.resetInMs / 1000));
      if (c.count > config.MAX_REQUESTS) throw tooMany(c.resetInMs);
    });
  },
  { name: 'gatehouse-rate-limit' },
);
