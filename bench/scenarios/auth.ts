/**
 * Login throughput against raw argon2id verification, and /health latency while logins saturate the CPU
 * (the event loop must stay free: hashing runs on the service's own low-priority hashing threads).
 *
 * Same parameters, thread count and priority on both sides: the service hashes on PASSWORD_HASH_THREADS
 * threads at nice 10, the baseline on a libuv pool of as many threads (UV_THREADPOOL_SIZE), one per core,
 * at nice 10 too (which changes nothing on an idle machine, and gives both the same share of a busy one).
 */
import { availableParallelism } from 'node:os';
import { runChild } from '../lib/child.ts';
import type { BenchEnv, Scenario } from '../lib/env.ts';
import { serviceDatabase } from '../lib/env.ts';
import { runLoad } from '../lib/load.ts';
import { MB, type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';

const ARGON2 = { memoryCost: 19456, timeCost: 2, parallelism: 1 };
const CONNECTIONS = 8;
const THREADS = availableParallelism();
/** The nice value of the service's hashing threads (src/auth/passwords.ts). */
const HASH_NICE = 10;

async function register(url: string, email: string, password: string): Promise<void> {
  const res = await fetch(`${url}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password, cookie: false }),
  });
  if (res.status !== 200) throw new Error(`register answered ${res.status}: ${await res.text()}`);
}

export const authScenarios: Scenario = {
  name: 'auth',
  async run(env: BenchEnv): Promise<Row[]> {
    const rows: Row[] = [];
    const database = await serviceDatabase(env);
    const svc = await startService({
      ...database.vars,
      JWT_ALGORITHM: 'HS256',
      JWT_KEY: 'bench-secret-bench-secret-bench-secret-0123',
      ARGON2_MEMORY_COST: String(ARGON2.memoryCost),
      ARGON2_TIME_COST: String(ARGON2.timeCost),
      ARGON2_PARALLELISM: String(ARGON2.parallelism),
      PASSWORD_HASH_THREADS: String(THREADS),
    });
    try {
      const email = 'bench@example.com';
      const password = 'correct horse battery staple';
      await register(svc.url, email, password);
      const params = `m=${ARGON2.memoryCost} t=${ARGON2.timeCost} p=${ARGON2.parallelism}`;

      env.log('health idle');
      const idle = await runLoad({
        url: `${svc.url}/health`,
        connections: 1,
        durationS: env.durationS,
        rate: 200,
      });

      env.log('argon2 baseline');
      const base = await runChild<{ perSec: number }>(
        'argon2-baseline.ts',
        [
          String(ARGON2.memoryCost),
          String(ARGON2.timeCost),
          String(ARGON2.parallelism),
          String(CONNECTIONS),
          String(env.durationS * 1000),
          String(HASH_NICE),
        ],
        { UV_THREADPOOL_SIZE: String(THREADS) },
      );

      env.log('login under load, with a /health probe');
      const body = JSON.stringify({ email, password, cookie: false });
      const [login, probe] = await Promise.all([
        runLoad({
          url: `${svc.url}/auth/login`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          connections: CONNECTIONS,
          durationS: env.durationS,
        }),
        runLoad({ url: `${svc.url}/health`, connections: 1, durationS: env.durationS, rate: 50 }),
      ]);
      if (login.non2xx > 0 || login.errors > 0)
        throw new Error(`login load had ${login.non2xx} non-2xx and ${login.errors} errors`);
      rows.push(
        row(
          'login (argon2id)',
          'req/s',
          login.requestsPerSec,
          base.perSec,
          { kind: 'min-ratio', value: 0.85 },
          {
            argon2: params,
            connections: CONNECTIONS,
            threads: THREADS,
            p50ms: login.latencyP50,
            p99ms: login.latencyP99,
            peakRssMB: svc.peakRss() / MB,
          },
        ),
      );
      rows.push(
        row(
          '/health p99 during logins',
          'ms',
          probe.latencyP99,
          idle.latencyP99,
          { kind: 'max-value', value: 25 },
          {
            idleP99ms: idle.latencyP99,
            loadedP50ms: probe.latencyP50,
            loadedMaxMs: probe.latencyMax,
          },
        ),
      );
    } finally {
      await svc.stop();
      await database.drop();
    }
    return rows;
  },
};
