/**
 * Counters behind the rate limits: fixed (or sliding) windows per key, in memory or in Redis (REDIS_URL)
 * so that several instances share them. Used by the request limits (rate-limit.ts) and the guess limits
 * (guesses.ts).
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { Outage } from '../outage.ts';

import type { Count, CounterStore } from './counter-store.ts';

export type { Count, CounterStore };

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

/**
 * What the limits do while the shared store (Redis) fails (RATE_LIMIT_REDIS_FAILURE): `local` counts in
 * this instance's memory until Redis answers again, `open` lets requests through unlimited, `closed`
 * refuses them with 503 RATE_LIMIT_UNAVAILABLE.
 */
export type StoreFailure = 'local' | 'open' | 'closed';

/** A counter operation the store could not perform, under RATE_LIMIT_REDIS_FAILURE=open: not limited. */
export class CountersUnavailable extends Error {
  override name = 'CountersUnavailable';
}

/**
 * The shared store with its failure policy. Every failure of `shared` (refused, lost, timed out) is
 * handled by the policy and the outage is logged once when it begins and once when it ends, not per
 * request. Under `local`, counts made during the outage are forgotten when Redis returns.
 */
export class FailoverStore implements CounterStore {
  private readonly outage: Outage;
  constructor(
    private readonly shared: CounterStore,
    private readonly policy: StoreFailure,
    private readonly local: CounterStore,
    log: FastifyBaseLogger,
  ) {
    const meanwhile = {
      local: "rate limits count in each instance's memory until it is back (RATE_LIMIT_REDIS_FAILURE=local)",
      open: 'requests are not rate limited until it is back (RATE_LIMIT_REDIS_FAILURE=open)',
      closed:
        'requests that are rate limited answer 503 RATE_LIMIT_UNAVAILABLE until it is back (RATE_LIMIT_REDIS_FAILURE=closed)',
    }[policy];
    this.outage = new Outage(
      log,
      'rate-limit store (Redis)',
      meanwhile,
      policy === 'closed' ? 'error' : 'warn',
    );
  }

  private async run<T>(op: (store: CounterStore) => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await op(this.shared);
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      this.outage.failed({ reason: { errorCode: e?.code, message: e?.message } });
      if (this.policy === 'local') return op(this.local);
      if (this.policy === 'closed') throw new AppError('RATE_LIMIT_UNAVAILABLE', undefined, { cause: err });
      throw new CountersUnavailable('rate-limit store unavailable', { cause: err });
    }
    this.outage.succeeded();
    return result;
  }

  increment(key: string, windowMs: number, slide?: boolean): Promise<Count> {
    return this.run((s) => s.increment(key, windowMs, slide));
  }
  peek(key: string): Promise<Count | undefined> {
    return this.run((s) => s.peek(key));
  }
  release(key: string): Promise<void> {
    return this.run((s) => s.release(key));
  }
  reset(key: string): Promise<void> {
    return this.run((s) => s.reset(key));
  }
  async close(): Promise<void> {
    await Promise.all([this.shared.close(), this.local.close()]);
  }
}

/** The counters of a process: opened by the context, used by the rate limits and the email budget. */
export interface Counters {
  store: CounterStore;
  /** Redis's answer to a ping, when the counters are shared there (readiness under the `closed` policy). */
  ping?: () => Promise<void>;
}

/** How long the start waits for Redis before going on without it (its outage policy applies meanwhile). */
const REDIS_START_WAIT_MS = 2_000;

/**
 * Opens the counters: in Redis when REDIS_URL is set (with RATE_LIMIT_REDIS_FAILURE's fallback), in
 * memory otherwise; none when RATE_LIMIT_ENABLED is false. The caller closes `store`.
 */
export async function openCounters(
  config: Pick<Config, 'RATE_LIMIT_ENABLED' | 'REDIS_URL' | 'RATE_LIMIT_REDIS_FAILURE'>,
  now: () => number,
  log: FastifyBaseLogger,
): Promise<Counters | undefined> {
  if (!config.RATE_LIMIT_ENABLED) return undefined;
  if (!config.REDIS_URL) return { store: new MemoryStore(now) };
  // Loaded only here: ioredis costs ~0.2 s of CPU to load, for instances that never use it.
  const { RedisStore } = await import('./counters-redis.ts');
  const redis = new RedisStore(config.REDIS_URL);
  if (!(await redis.connected(REDIS_START_WAIT_MS)))
    log.warn('Redis (REDIS_URL) is not reachable yet; the rate limits start without it');
  return {
    store: new FailoverStore(redis, config.RATE_LIMIT_REDIS_FAILURE, new MemoryStore(now), log),
    ping: () => redis.ping(),
  };
}

/** A key part for an email: hashed, so the counters hold no addresses. */
export function emailKey(email: string): string {
  return createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32);
}
