/**
 * Two instances sharing one PostgreSQL database and one Redis, behind a round-robin HTTP proxy in the test
 * process (as behind a load balancer): a refresh token rotated on one instance is honoured and its reuse
 * detected on the other, and the rate limits count requests to both in one counter. PostgreSQL and Redis
 * only (PGlite serves one process); without them the suite is reported as not run. Both instances send
 * from the one durable outbox, and each email reaches the SMTP server once.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { openPostgres } from '../../src/db/database.ts';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts';

/** A reverse proxy that sends request n to `targets[n % targets.length]` and records which one served it. */
async function roundRobin(
  targets: string[],
): Promise<{ url: string; served: number[]; close(): Promise<void> }> {
  const served: number[] = [];
  let n = 0;
  const server: Server = createServer((req, res) => {
    const index = n++ % targets.length;
    served.push(index);
    const target = new URL(targets[index] as string);
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      res.writeHead(502).end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const runs = runsHere('postgres', 'two instances (PostgreSQL)') && runsHere('redis', 'two instances (Redis)');

describe('two instances behind a round-robin proxy, sharing PostgreSQL and Redis', { skip: !runs }, () => {
  let a: TestApp;
  let b: TestApp;
  let proxy: Awaited<ReturnType<typeof roundRobin>>;
  let clock: TestClock;
  let smtp: TestSmtp;
  /** A client address of this run's own, so that counters left in Redis by other suites do not count. */
  const clientAddress = () => `10.${randomBytes(3).join('.')}`;
  const MAX = 8;

  before(async () => {
    const shared = await createTestDatabase('postgres');
    smtp = await startSmtp();
    const settings = {
      ...HS,
      REDIS_URL: process.env['REDIS_URL'],
      TRUST_PROXY: ['loopback'],
      // Reuse is detected at once (no grace interval for racing tabs), so the test needs no waiting.
      REFRESH_TOKEN_REUSE_INTERVAL: 0,
      MAX_REQUESTS: MAX,
      TIME_FRAME: 60_000,
      RATE_LIMIT_REGISTER_MAX: 1000,
      RATE_LIMIT_REFRESH_MAX: 1000,
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: smtp.port,
      LOST_PASSWORD_ENABLED: true,
      REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
      REDIRECT_URL_ERROR: 'http://app.test/failed',
      // Each instance wakes its own sender after a commit and polls for the other's rows this often.
      EMAIL_POLL_INTERVAL_MS: 100,
    };
    // One clock for both, as real instances share time (each test app otherwise has its own frozen one).
    clock = new TestClock(Date.now());
    a = await buildTestApp('postgres', settings, { database: shared, clock });
    // The second instance: its own pool on the same database; dropping the database is the first's job.
    const pool = openPostgres(shared.url as string, 5);
    b = await buildTestApp('postgres', settings, {
      database: { db: pool, url: shared.url, drop: () => pool.close() },
      clock,
    });
    for (const t of [a, b]) await t.app.listen({ host: '127.0.0.1', port: 0 });
    const urlOf = (t: TestApp) => `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    proxy = await roundRobin([urlOf(a), urlOf(b)]);
  });
  after(async () => {
    await proxy?.close();
    await b?.close();
    await a?.close();
    await smtp?.stop();
  });

  /** A request through the proxy, from this run's client address; says which instance answered. */
  async function viaProxy(
    client: string,
    path: string,
    init: RequestInit = {},
  ): Promise<{ res: Response; instance: number }> {
    const headers = new Headers(init.headers);
    headers.set('x-forwarded-for', client);
    const res = await fetch(`${proxy.url}${path}`, { ...init, headers });
    return { res, instance: proxy.served[proxy.served.length - 1] as number };
  }

  it('rotates a refresh token on one instance, honours the successor on the other, and detects the reuse of the old one there, ending the sign-in on both', async () => {
    const email = `two-${randomBytes(6).toString('hex')}@example.com`;
    const client = clientAddress();
    const registered = await viaProxy(client, '/auth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'correct horse battery', cookie: false }),
    });
    assert.equal(registered.res.status, 200);
    const r0 = ((await registered.res.json()) as { refresh_token: string }).refresh_token;
    const refresh = (token: string) =>
      viaProxy(client, `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}`);

    const first = await refresh(r0);
    assert.equal(first.res.status, 200);
    const r1 = ((await first.res.json()) as { refresh_token: string }).refresh_token;
    const second = await refresh(r1);
    assert.equal(second.res.status, 200, 'the successor works on the other instance');
    assert.notEqual(second.instance, first.instance);
    const r2 = ((await second.res.json()) as { refresh_token: string }).refresh_token;

    // r0 was rotated by the instance that served `first`; one request in between sends the reuse to the other.
    await (await viaProxy(client, '/health')).res.arrayBuffer();
    clock.advance(1000);
    const reuse = await refresh(r0);
    assert.notEqual(reuse.instance, first.instance);
    assert.equal(reuse.res.status, 401);
    assert.equal(((await reuse.res.json()) as { code: string }).code, 'INVALID_REFRESH_TOKEN');
    // The whole sign-in ended: its latest token fails on both instances.
    for (let i = 0; i < 2; i++) {
      const after = await refresh(r2);
      assert.equal(after.res.status, 401, `instance ${after.instance}`);
      await after.res.arrayBuffer();
    }
  });

  it('counts the requests to both instances against one limit', async () => {
    const client = clientAddress();
    const statuses: number[] = [];
    const instances = new Set<number>();
    for (let i = 0; i < MAX + 2; i++) {
      const { res, instance } = await viaProxy(client, '/version');
      instances.add(instance);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    assert.deepEqual([...instances].sort(), [0, 1]);
    // Alone, each instance would have let MAX requests through (2 × MAX in all); shared, MAX in all.
    assert.deepEqual(statuses, [...Array(MAX).fill(200), 429, 429]);
  });

  it('sends each email of the shared outbox once, whichever instance queued it and both senders polling', async () => {
    const emails = Array.from(
      { length: 6 },
      (_, i) => `mail-${i}-${randomBytes(6).toString('hex')}@example.com`,
    );
    for (const email of emails) {
      const { res } = await viaProxy(clientAddress(), '/auth/register', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'correct horse battery', cookie: false }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    // A reset request is stored, answered 204, then turned into its email by whichever sender claims it.
    const queuedBy = new Set<number>();
    for (const email of emails) {
      const { res, instance } = await viaProxy(clientAddress(), '/auth/change-password/request', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email }),
      });
      assert.equal(res.status, 204);
      queuedBy.add(instance);
    }
    assert.deepEqual([...queuedBy].sort(), [0, 1], 'both instances queued requests');
    const deadline = Date.now() + 30_000;
    while (emails.some((e) => smtp.to(e).length === 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    // Several poll intervals more, so that a second sending of any row would have happened by now.
    await new Promise((r) => setTimeout(r, 1_000));
    for (const email of emails) assert.equal(smtp.to(email).length, 1, `emails to ${email}`);
  });
});
