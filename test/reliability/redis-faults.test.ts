/**
 * Redis (the shared rate-limit counters) going away never makes a 500 nor a hung request: the limits
 * follow RATE_LIMIT_REDIS_FAILURE — `local` counts in the instance's memory, `open` lets requests
 * through, `closed` answers 503 RATE_LIMIT_UNAVAILABLE with Retry-After and /health/ready reports it —
 * and the outage is logged once, then its end. Redis is reached through a TCP proxy in this process, so
 * the shared server is never stopped.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { HS, newEmail } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { captureLog } from '../helpers/log.ts';
import { runsHere } from '../helpers/requirements.ts';
import { startTcpProxy, type TcpProxy, targetOf } from '../helpers/tcp-proxy.ts';

const DOWN = /^rate-limit store \(Redis\) unavailable/;
const UP = /^rate-limit store \(Redis\) available again/;

/** A client address of its own per call, so counters of other suites sharing Redis never interfere. */
const client = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;

if (runsHere('redis', 'Redis outage behaviour')) {
  const REDIS_URL = String(process.env['REDIS_URL']);

  for (const policy of ['closed', 'open', 'local'] as const) {
    describe(`Redis unreachable with RATE_LIMIT_REDIS_FAILURE=${policy}`, () => {
      let proxy: TcpProxy;
      let t: TestApp;
      const captured = captureLog('info');
      before(async () => {
        proxy = await startTcpProxy(targetOf(REDIS_URL));
        // `open` starts with Redis already away: the start must not wait for it for long, nor fail.
        if (policy === 'open') await proxy.refuse();
        t = await buildTestApp(
          'pglite',
          {
            ...HS,
            STORAGE_ENABLED: false,
            REDIS_URL: proxy.url(REDIS_URL),
            RATE_LIMIT_REDIS_FAILURE: policy,
            MAX_REQUESTS: policy === 'local' ? 3 : 1000,
          },
          { log: captured.log },
        );
      });
      after(async () => {
        await t?.close();
        await proxy?.close();
      });

      async function get(url: string, ip: string) {
        const started = Date.now();
        const res = await t.app.inject({ url, remoteAddress: ip });
        return { res, ms: Date.now() - started };
      }

      async function redisBack(ip: string) {
        await proxy.accept();
        for (let i = 0; i < 100; i++) {
          if (captured.matching(UP).length > 0 && (await get('/version', ip)).res.statusCode === 200) return;
          await get('/version', ip);
          await sleep(100);
        }
        assert.fail('the limits did not use Redis again');
      }

      if (policy === 'closed') {
        it('answers 503 RATE_LIMIT_UNAVAILABLE with Retry-After, promptly, reports it on /health/ready, and recovers', async () => {
          const ip = client();
          assert.equal((await get('/version', ip)).res.statusCode, 200);
          await proxy.refuse();
          proxy.dropAll();
          for (let i = 0; i < 4; i++) {
            const { res, ms } = await get('/version', ip);
            assert.equal(res.statusCode, 503, res.body);
            assert.equal(res.json().code, 'RATE_LIMIT_UNAVAILABLE');
            assert.equal(res.headers['retry-after'], '5');
            assert.ok(ms < 3_000, `answered in ${ms} ms, not held until Redis returns`);
          }
          const login = await t.app.inject({
            method: 'POST',
            url: '/auth/login',
            remoteAddress: ip,
            payload: { email: newEmail(), password: 'whatever password' },
          });
          assert.equal(login.statusCode, 503, login.body);
          const ready = await get('/health/ready', ip);
          assert.equal(ready.res.statusCode, 503);
          assert.match(ready.res.json().message, /rate-limit store/);
          assert.equal((await get('/health', ip)).res.statusCode, 204);
          assert.equal(captured.matching(DOWN).length, 1, 'one line for the outage, not one per request');
          await redisBack(ip);
          assert.equal((await get('/health/ready', ip)).res.statusCode, 204);
          assert.equal(captured.matching(UP).length, 1);
        });

        it('answers promptly when Redis stops answering without closing the connection', async () => {
          const ip = client();
          assert.equal((await get('/version', ip)).res.statusCode, 200);
          proxy.mode = 'blackhole';
          proxy.stallAll();
          try {
            const { res, ms } = await get('/version', ip);
            assert.equal(res.statusCode, 503, res.body);
            assert.ok(ms >= 500, `${ms} ms: the command was sent and timed out`);
            assert.ok(ms < 5_000, `answered in ${ms} ms`);
          } finally {
            proxy.mode = 'forward';
            proxy.dropAll();
          }
        });
      }

      if (policy === 'open') {
        it('serves every request unlimited while Redis is away (it was away at start), and logs that once', async () => {
          const ip = client();
          for (let i = 0; i < 5; i++) {
            const { res, ms } = await get('/version', ip);
            assert.equal(res.statusCode, 200, res.body);
            assert.ok(ms < 3_000, `answered in ${ms} ms`);
          }
          // The guess limits are off too: a wrong password keeps getting its 401, never a 429 or a 5xx.
          const email = newEmail();
          for (let i = 0; i < 12; i++) {
            const r = await t.app.inject({
              method: 'POST',
              url: '/auth/login',
              remoteAddress: ip,
              payload: { email, password: 'wrong password here' },
            });
            assert.equal(r.statusCode, 401, r.body);
          }
          assert.equal((await get('/health/ready', ip)).res.statusCode, 204, 'an open limiter still serves');
          assert.equal(captured.matching(DOWN).length, 1);
          await redisBack(ip);
        });
      }

      if (policy === 'local') {
        it("keeps limiting in the instance's memory while Redis is away", async () => {
          const ip = client();
          await proxy.refuse();
          proxy.dropAll();
          const statuses: number[] = [];
          for (let i = 0; i < 5; i++) statuses.push((await get('/version', ip)).res.statusCode);
          assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
          assert.equal((await get('/health/ready', ip)).res.statusCode, 204);
          assert.equal(captured.matching(DOWN).length, 1);
          assert.equal(captured.matching(DOWN)[0]?.['level'], 40, 'a warning: the service still limits');
          await proxy.accept();
        });
      }
    });
  }
}
