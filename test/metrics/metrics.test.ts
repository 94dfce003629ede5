/**
 * GET /metrics: who may scrape it (METRICS_TOKEN on the main port, or METRICS_PORT), and that the scraped
 * text, parsed, moves with the requests the service answers: per-route counts and latencies, sign-in and
 * refresh outcomes, emails and the email outbox, hashing, database pool, image renders and object-store
 * failures.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { bearer, login, newEmail, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { hbpRules } from '../storage/helpers.ts';

const TOKEN = 'metrics-token-of-at-least-thirty-two-characters';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus' text exposition format (the subset prom-client writes). */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) {
      types.set(type[1] as string, type[2] as string);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    assert.ok(m, `not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
    }
    const raw = m[3] as string;
    // Go's float syntax, as Prometheus reads it: NaN and Inf in any case (prom-client writes "Nan").
    const value = /^[+-]?inf$/i.test(raw)
      ? raw.startsWith('-')
        ? -Infinity
        : Infinity
      : /^nan$/i.test(raw)
        ? Number.NaN
        : Number(raw);
    assert.ok(!Number.isNaN(value) || /^nan$/i.test(raw), `bad value in ${line}`);
    samples.push({ name: m[1] as string, labels, value });
  }
  return { samples, types };
}

/** The value of the sample `name` whose labels include `labels` (0 when absent: a counter not yet moved). */
function sampleSum(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const hit = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hit.reduce((sum, s) => sum + s.value, 0);
}

async function scrape(t: TestApp): Promise<Sample[]> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: bearer(TOKEN) });
  assert.equal(res.statusCode, 200, res.body);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parseExposition(res.body).samples;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

describe('/metrics access', () => {
  it('answers 404 when neither METRICS_TOKEN nor METRICS_PORT is set', async () => {
    const t = await buildTestApp('pglite');
    try {
      const res = await t.app.inject({ method: 'GET', url: '/metrics' });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'NOT_FOUND');
      assert.equal(t.app.metrics, undefined);
    } finally {
      await t.close();
    }
  });

  it('refuses a scrape without the token or with a wrong one (401, Bearer challenge), and never lists it in /openapi.json', async () => {
    const t = await buildTestApp('pglite', { METRICS_TOKEN: TOKEN });
    try {
      for (const headers of [
        {},
        bearer('wrong-token'),
        { authorization: TOKEN },
        { authorization: `Basic ${TOKEN}` },
      ]) {
        const res = await t.app.inject({ method: 'GET', url: '/metrics', headers });
        assert.equal(res.statusCode, 401, JSON.stringify(headers));
        assert.equal(res.json().code, 'UNAUTHENTICATED');
        assert.equal(res.headers['www-authenticate'], 'Bearer realm="metrics"');
        assert.ok(!res.body.includes(TOKEN));
      }
      const ok = await t.app.inject({ method: 'GET', url: '/metrics', headers: bearer(TOKEN) });
      assert.equal(ok.statusCode, 200);
      assert.equal(ok.headers['cache-control'], 'no-store');
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      assert.equal(doc.paths['/metrics'], undefined);
    } finally {
      await t.close();
    }
  });

  it('limits wrong-token guesses per client address like wrong admin secrets (429)', async () => {
    const t = await buildTestApp('pglite', { METRICS_TOKEN: TOKEN, RATE_LIMIT_IP_FAILURES_MAX: 3 });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: bearer(`guess-${i}`) });
        statuses.push(res.statusCode);
      }
      assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
      // The right token is refused too while the address is over its limit: the limit is per address.
      const right = await t.app.inject({ method: 'GET', url: '/metrics', headers: bearer(TOKEN) });
      assert.equal(right.statusCode, 429);
    } finally {
      await t.close();
    }
  });

  it('serves /metrics on METRICS_PORT only (not on the main port), with the token when one is set', async () => {
    const port = await freePort();
    const t = await buildTestApp('pglite', {
      METRICS_PORT: port,
      METRICS_HOST: '127.0.0.1',
      METRICS_TOKEN: TOKEN,
    });
    try {
      const main = await t.app.inject({ method: 'GET', url: '/metrics', headers: bearer(TOKEN) });
      assert.equal(main.statusCode, 404);
      const denied = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(denied.status, 401);
      await denied.text();
      await t.app.inject({ method: 'GET', url: '/healthz' });
      const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: bearer(TOKEN) });
      assert.equal(res.status, 200);
      const { samples } = parseExposition(await res.text());
      assert.equal(
        sampleSum(samples, 'gatehouse_http_requests_total', {
          method: 'GET',
          route: '/healthz',
          status: '200',
        }),
        1,
      );
      const other = await fetch(`http://127.0.0.1:${port}/health`);
      assert.equal(other.status, 404);
      await other.text();
    } finally {
      await t.close();
    }
    // Closed with the app.
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`));
  });

  it('an attacker guessing the token on METRICS_PORT is limited per address like at the admin secret (429)', async () => {
    const port = await freePort();
    const t = await buildTestApp('pglite', {
      METRICS_PORT: port,
      METRICS_HOST: '127.0.0.1',
      METRICS_TOKEN: TOKEN,
      RATE_LIMIT_IP_FAILURES_MAX: 3,
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: bearer(`guess-${i}`) });
        statuses.push(res.status);
        await res.text();
      }
      assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
      const right = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: bearer(TOKEN) });
      assert.equal(right.status, 429);
      assert.ok(Number(right.headers.get('retry-after')) >= 1);
      await right.text();
    } finally {
      await t.close();
    }
  });

  it('refuses to start in production with METRICS_PORT and no METRICS_TOKEN, unless METRICS_HOST is loopback', async () => {
    const { configFrom } = await import('../../src/config.ts');
    const production = {
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://x/y',
      JWT_ALGORITHM: 'HS256',
      JWT_KEY: 'k'.repeat(64),
      COOKIE_SECRET: 'c'.repeat(32),
      MFA_ENCRYPTION_KEY: 'm'.repeat(32),
      EMAILS_ENABLED: false,
      HOST: '0.0.0.0',
      METRICS_PORT: 9100,
    } as const;
    assert.throws(() => configFrom(production), /METRICS_PORT in production needs METRICS_TOKEN/);
    assert.throws(
      () => configFrom({ ...production, METRICS_HOST: '10.0.0.5' }),
      /METRICS_PORT in production needs METRICS_TOKEN/,
    );
    for (const host of ['127.0.0.1', '::1', 'localhost'])
      assert.equal(configFrom({ ...production, METRICS_HOST: host }).METRICS_HOST, host);
    assert.equal(configFrom({ ...production, METRICS_TOKEN: TOKEN }).METRICS_PORT, 9100);
  });

  it('refuses to start with METRICS_PORT equal to PORT, and a short METRICS_TOKEN in production', async () => {
    const { configFrom, ConfigError } = await import('../../src/config.ts');
    assert.throws(() => configFrom({ PORT: 4000, METRICS_PORT: 4000 }), ConfigError);
    assert.throws(
      () => configFrom({ NODE_ENV: 'production', DATABASE_URL: 'postgres://x/y', METRICS_TOKEN: 'short' }),
      /METRICS_TOKEN must be at least 32 characters in production/,
    );
  });
});

for (const kind of dbKinds()) {
  describe(`/metrics counters [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        METRICS_TOKEN: TOKEN,
        LOST_PASSWORD_ENABLED: true,
        RATE_LIMIT_LOGIN_MAX: 6,
        REFRESH_TOKEN_REUSE_INTERVAL: 10,
        // The image test uploads anonymously to /public.
        ...hbpRules(),
      });
    });
    after(() => t.close());

    it('counts requests per method, route pattern and status, with a latency histogram', async () => {
      const before = await scrape(t);
      for (let i = 0; i < 3; i++) await t.app.inject({ method: 'GET', url: '/healthz' });
      await t.app.inject({ method: 'GET', url: '/no/such/path' });
      await t.app.inject({ method: 'GET', url: '/storage/m/public/missing.txt' });
      const now = await scrape(t);
      const moved = (name: string, labels: Record<string, string>) =>
        sampleSum(now, name, labels) - sampleSum(before, name, labels);
      const healthz = { method: 'GET', route: '/healthz', status: '200' };
      assert.equal(moved('gatehouse_http_requests_total', healthz), 3);
      assert.equal(moved('gatehouse_http_request_duration_seconds_count', healthz), 3);
      assert.ok(moved('gatehouse_http_request_duration_seconds_sum', healthz) > 0);
      assert.equal(moved('gatehouse_http_request_duration_seconds_bucket', { ...healthz, le: '+Inf' }), 3);
      assert.equal(moved('gatehouse_http_requests_total', { route: 'unmatched', status: '404' }), 1);
      // A file path is never a label: the route pattern is.
      assert.equal(moved('gatehouse_http_requests_total', { route: '/storage/m/*', status: '404' }), 1);
      assert.ok(!now.some((s) => Object.values(s.labels).some((v) => v.includes('missing.txt'))));
      // Node's process metrics come along.
      assert.ok(sampleSum(now, 'process_cpu_user_seconds_total') > 0);
    });

    it('counts sign-in outcomes: success, wrong password, not activated, locked', async () => {
      const active = await signUp(t, newEmail());
      const pending = await signUp(t, newEmail());
      await t.ctx.db.query('test-deactivate', 'UPDATE auth.accounts SET active = false WHERE user_id = $1', [
        pending.userId,
      ]);
      const before = await scrape(t);
      const ok = await login(t, { email: active.email, password: active.password });
      assert.equal(ok.statusCode, 200);
      assert.equal((await login(t, { email: active.email, password: 'not the password' })).statusCode, 401);
      assert.equal((await login(t, { email: newEmail(), password: 'nobody here' })).statusCode, 401);
      assert.equal((await login(t, { email: pending.email, password: pending.password })).statusCode, 400);
      // RATE_LIMIT_LOGIN_MAX=6 per address: the 7th sign-in of this window is refused.
      let locked = 0;
      for (let i = 0; i < 4; i++) {
        const r = await login(t, { email: active.email, password: active.password });
        if (r.statusCode === 429) locked++;
      }
      assert.ok(locked >= 1, 'the login rate limit refused at least one sign-in');
      const now = await scrape(t);
      const moved = (outcome: string) =>
        sampleSum(now, 'gatehouse_sign_ins_total', { method: 'password', outcome }) -
        sampleSum(before, 'gatehouse_sign_ins_total', { method: 'password', outcome });
      assert.equal(moved('wrong_password'), 2);
      assert.equal(moved('not_activated'), 1);
      assert.equal(moved('locked'), locked);
      assert.equal(moved('success'), 1 + (4 - locked));
    });

    it('counts refresh outcomes: rotated, grace (racing tabs) and reuse detected', async () => {
      // A fresh limiter window: the previous test spent this address's sign-ins.
      t.clock.advance(60 * 60 * 1000);
      const u = await signUp(t, newEmail());
      const before = await scrape(t);
      const refresh = (token: string) =>
        t.app.inject({
          method: 'GET',
          url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}`,
        });
      const first = await refresh(u.refreshToken);
      assert.equal(first.statusCode, 200, first.body);
      const sibling = await refresh(u.refreshToken);
      assert.equal(sibling.statusCode, 200, sibling.body);
      t.clock.advance(11_000);
      const replay = await refresh(u.refreshToken);
      assert.equal(replay.statusCode, 401);
      assert.equal((await refresh('not-a-token')).statusCode, 401);
      const now = await scrape(t);
      const moved = (outcome: string) =>
        sampleSum(now, 'gatehouse_token_refreshes_total', { outcome }) -
        sampleSum(before, 'gatehouse_token_refreshes_total', { outcome });
      assert.deepEqual(
        {
          rotated: moved('rotated'),
          grace: moved('grace'),
          reuse: moved('reuse_detected'),
          invalid: moved('invalid'),
        },
        { rotated: 1, grace: 1, reuse: 1, invalid: 1 },
      );
    });

    it('counts emails handed to the outbox, and hashing jobs and their wait', async () => {
      const before = await scrape(t);
      const u = await signUp(t, newEmail());
      const asked = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/request',
        payload: { email: u.email },
      });
      assert.equal(asked.statusCode, 204, asked.body);
      await t.ctx.tasks.idle();
      const now = await scrape(t);
      const sent = { outcome: 'sent', mode: 'outbox', template: 'lost-password' };
      assert.equal(
        sampleSum(now, 'gatehouse_emails_total', sent) - sampleSum(before, 'gatehouse_emails_total', sent),
        1,
      );
      assert.ok(
        sampleSum(now, 'gatehouse_password_hash_wait_seconds_count') >
          sampleSum(before, 'gatehouse_password_hash_wait_seconds_count'),
      );
      // Idle now: nothing waits or runs.
      assert.equal(sampleSum(now, 'gatehouse_password_hash_jobs', { state: 'waiting' }), 0);
      assert.ok(now.some((s) => s.name === 'gatehouse_password_hash_jobs' && s.labels.state === 'running'));
      assert.ok(now.some((s) => s.name === 'gatehouse_password_hash_refused_total'));
    });

    it('reports the email outbox backlog, and its failed attempts by what follows them', async () => {
      const before = await scrape(t);
      // One email that will not render (a retry), one waiting for a later attempt, one given up.
      await t.ctx.db.query(
        'TestOutboxRows',
        `INSERT INTO auth.email_outbox (kind, template, recipient, message, created_at, next_attempt_at, failed_at)
         VALUES ('email', 'no-such-template', 'broken@example.com', '{"locals":{}}', now(), now(), NULL),
                ('email', 'lost-password', 'later@example.com', '{"locals":{}}', now() - interval '90 seconds',
                 now() + interval '1 hour', NULL),
                ('email', 'lost-password', 'gone@example.com', NULL, now(), now(), now())`,
      );
      try {
        t.ctx.outbox.wake();
        await t.ctx.tasks.idle();
        const now = await scrape(t);
        const retry = { outcome: 'retry', template: 'no-such-template' };
        assert.equal(
          sampleSum(now, 'gatehouse_email_outbox_failures_total', retry) -
            sampleSum(before, 'gatehouse_email_outbox_failures_total', retry),
          1,
        );
        assert.equal(sampleSum(now, 'gatehouse_email_outbox_pending'), 2);
        assert.ok(sampleSum(now, 'gatehouse_email_outbox_oldest_pending_seconds') >= 90);
        assert.equal(sampleSum(now, 'gatehouse_email_outbox_given_up'), 1);
      } finally {
        await t.ctx.db.query('TestOutboxCleanUp', 'DELETE FROM auth.email_outbox WHERE sent_at IS NULL');
      }
    });

    it('reports the revoked list: its size grows when a session ends, it is trusted, and the lag is known', async () => {
      const before = await scrape(t);
      assert.equal(sampleSum(before, 'gatehouse_revoked_list_trusted'), 1);
      const reg = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: {
          email: `revoked-${Date.now()}@example.com`,
          password: 'correct horse battery',
          cookie: false,
        },
      });
      assert.equal(reg.statusCode, 200, reg.body);
      const out = await t.app.inject({
        method: 'POST',
        url: '/auth/logout',
        headers: bearer(reg.json().jwt_token),
      });
      assert.equal(out.statusCode, 204);
      const now = await scrape(t);
      assert.equal(
        sampleSum(now, 'gatehouse_revoked_list_entries') -
          sampleSum(before, 'gatehouse_revoked_list_entries'),
        1,
      );
      assert.ok(now.some((s) => s.name === 'gatehouse_revocation_notification_lag_seconds'));
    });

    it(`reports the database pool ${kind === 'postgres' ? 'connections' : '(none for PGlite)'}`, async () => {
      const now = await scrape(t);
      if (kind === 'postgres') {
        // The test database's pool (test/helpers/db.ts), not DATABASE_POOL_SIZE's.
        assert.ok(sampleSum(now, 'gatehouse_db_pool_max_connections') >= 1);
        // The scrape itself is not a query: every open connection is idle, none waits.
        assert.equal(sampleSum(now, 'gatehouse_db_pool_connections', { state: 'in_use' }), 0);
        assert.equal(sampleSum(now, 'gatehouse_db_pool_connections', { state: 'waiting' }), 0);
        assert.ok(sampleSum(now, 'gatehouse_db_pool_connections', { state: 'idle' }) >= 1);
      } else {
        assert.ok(!now.some((s) => s.name.startsWith('gatehouse_db_pool')));
      }
    });

    it('counts image renders and shows the transform queue', async () => {
      const png = await sharp({
        create: { width: 40, height: 30, channels: 3, background: { r: 200, g: 40, b: 40 } },
      })
        .png()
        .toBuffer();
      const up = await t.app.inject({
        method: 'POST',
        url: '/storage/o/public/metrics.png',
        headers: { 'content-type': 'image/png' },
        payload: png,
      });
      assert.equal(up.statusCode, 200, up.body);
      const before = await scrape(t);
      const img = await t.app.inject({ method: 'GET', url: '/storage/o/public/metrics.png?w=10' });
      assert.equal(img.statusCode, 200);
      const now = await scrape(t);
      assert.equal(
        sampleSum(now, 'gatehouse_image_renders_total') - sampleSum(before, 'gatehouse_image_renders_total'),
        1,
      );
      assert.equal(sampleSum(now, 'gatehouse_image_transforms', { state: 'running' }), 0);
      assert.equal(sampleSum(now, 'gatehouse_image_transforms', { state: 'waiting' }), 0);
    });
  });
}

describe('/metrics with an unreachable object store', () => {
  it('counts each storage request the store could not answer (503)', async () => {
    const port = await freePort();
    const t = await buildTestApp('pglite', {
      METRICS_TOKEN: TOKEN,
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_BUCKET: 'nowhere',
      S3_ACCESS_KEY_ID: 'x',
      S3_SECRET_ACCESS_KEY: 'y',
    });
    try {
      const before = await scrape(t);
      const res = await t.app.inject({ method: 'GET', url: '/storage/m/public/file.txt' });
      assert.equal(res.statusCode, 503, res.body);
      const now = await scrape(t);
      assert.equal(
        sampleSum(now, 'gatehouse_object_store_errors_total') -
          sampleSum(before, 'gatehouse_object_store_errors_total'),
        1,
      );
    } finally {
      await t.close();
    }
  });
});
