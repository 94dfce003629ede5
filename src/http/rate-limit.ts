/**
 * Rate limits: fixed-window counters per key, in memory or in Redis (REDIS_URL) so that several instances
 * share them. The global limit (MAX_REQUESTS per TIME_FRAME per client IP, health routes excepted) runs on
 * every request; routes add tighter limits through `app.limiter` (login, register and token refresh per
 * IP, emails per address) and limit credential guesses through `app.guesses` (guesses.ts). Over a limit:
 * 429 with `Retry-After`. RATE_LIMIT_ENABLED=false turns everything off.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { type Count, type CounterStore, MemoryStore, RedisStore } from './counters.ts';
import { type GuessLimiter, makeGuessLimiter } from './guesses.ts';

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
  async (app: FastifyInstance, opts: { config: Config; clock: Clock; store?: CounterStore }) => {
    const { config } = opts;
    let store: CounterStore | undefined;
    if (config.RATE_LIMIT_ENABLED) {
      store =
        opts.store ??
        (config.REDIS_URL
          ? new RedisStore(config.REDIS_URL)
          : new MemoryStore(() => opts.clock.now().getTime()));
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
