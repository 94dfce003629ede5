/**
 * Rate limits: fixed-window counters per key, in memory or in Redis (REDIS_URL) so that several instances
 * share them. The global limit (MAX_REQUESTS per TIME_FRAME per client IP, health routes excepted) runs on
 * every request; routes add tighter limits through `app.limiter` (login, register and token refresh per
 * IP, emails per address) and limit credential guesses through `app.guesses` (guesses.ts). Over a limit:
 * 429 with `Retry-After`. RATE_LIMIT_ENABLED=false turns everything off. While Redis fails, the
 * limits follow RATE_LIMIT_REDIS_FAILURE (counters.ts FailoverStore).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import {
  type Count,
  type CounterStore,
  CountersUnavailable,
  FailoverStore,
  MemoryStore,
} from './counters.ts';
import { type GuessLimiter, makeGuessLimiter } from './guesses.ts';
import type { ReadinessCheck } from './health.ts';

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

type Safely = <T>(what: () => Promise<T>) => Promise<T | undefined>;

/**
 * Runs a counter operation; undefined when the store could not count and the policy lets the request
 * through unlimited (RATE_LIMIT_REDIS_FAILURE=open, logged once per outage by the store). Under `closed`
 * the store's 503 goes through.
 */
function safelyWith(log: FastifyInstance['log']): Safely {
  return async (what) => {
    try {
      return await what();
    } catch (err) {
      if (err instanceof AppError) throw err;
      if (!(err instanceof CountersUnavailable))
        log.warn({ err }, 'rate-limit counter failed; request not limited');
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

/** How long the start waits for Redis before going on without it (its outage policy applies meanwhile). */
const REDIS_START_WAIT_MS = 2_000;

export const rateLimitPlugin = fp(
  async (
    app: FastifyInstance,
    opts: { config: Config; clock: Clock; store?: CounterStore; readiness?: ReadinessCheck[] },
  ) => {
    const { config } = opts;
    let store: CounterStore | undefined;
    if (config.RATE_LIMIT_ENABLED) {
      const memory = () => new MemoryStore(() => opts.clock.now().getTime());
      if (opts.store) store = opts.store;
      else if (config.REDIS_URL) {
        // Loaded only here: ioredis costs ~0.2 s of CPU to load, for instances that never use it.
        const { RedisStore } = await import('./counters-redis.ts');
        const redis = new RedisStore(config.REDIS_URL);
        if (!(await redis.connected(REDIS_START_WAIT_MS)))
          app.log.warn('Redis (REDIS_URL) is not reachable yet; the rate limits start without it');
        const policy = config.RATE_LIMIT_REDIS_FAILURE;
        store = new FailoverStore(redis, policy, memory(), app.log);
        // Failing closed, an instance without Redis refuses most requests: it is not ready. Otherwise it
        // serves, and taking every instance out of the balancer for a Redis outage would be worse.
        if (policy === 'closed')
          opts.readiness?.push({ name: 'rate-limit store', check: () => redis.ping() });
      } else store = memory();
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
      const c: Count | undefined = await safely(() => s.increment(`global:${request.ip}`, config.TIME_FRAME));
      if (!c) return;
      reply.header('x-ratelimit-limit', config.MAX_REQUESTS);
      reply.header('x-ratelimit-remaining', Math.max(0, config.MAX_REQUESTS - c.count));
      reply.header('x-ratelimit-reset', Math.ceil(c.resetInMs / 1000));
      if (c.count > config.MAX_REQUESTS) throw tooMany(c.resetInMs);
    });
  },
  { name: 'gatehouse-rate-limit' },
);
