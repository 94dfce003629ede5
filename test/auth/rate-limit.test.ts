import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { HS, login, newEmail, register, signUp } from './helpers.ts';

// Rate limits live outside the database, so these suites run on PGlite only.
describe('rate limits in memory', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, MAX_REQUESTS: 10_000 });
  });
  after(() => t.close());

  it('answers the 11th failed login for one email within the window with 429 and Retry-After', async () => {
    const s = await signUp(t);
    for (let i = 0; i < 10; i++) {
      const res = await login(t, { email: s.email, password: `wrong ${i}` });
      assert.equal(res.statusCode, 401, `attempt ${i + 1}`);
    }
    const blocked = await login(t, { email: s.email, password: s.password });
    assert.equal(blocked.statusCode, 429);
    assert.equal(blocked.json().message, 'You are being rate limited.');
    const retryAfter = Number(blocked.headers['retry-after']);
    assert.ok(retryAfter > 0 && retryAfter <= 300, String(retryAfter));
    assert.equal(
      (await login(t, { email: (await signUp(t)).email, password: 'correct horse battery' })).statusCode,
      200,
      'other emails unaffected',
    );
    t.clock.advance(300_001);
    assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200, 'window over');
  });

  it('does not count successful logins against the email', async () => {
    const s = await signUp(t);
    for (let i = 0; i < 15; i++)
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
  });
});

describe('per-route and global limits', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', {
      ...HS,
      MAX_REQUESTS: 40,
      RATE_LIMIT_REGISTER_MAX: 3,
      RATE_LIMIT_REFRESH_MAX: 2,
      RATE_LIMIT_LOGIN_MAX: 1000,
    });
  });
  after(() => t.close());

  it('limits registrations per IP', async () => {
    for (let i = 0; i < 3; i++)
      assert.equal((await register(t, { email: newEmail(), password: 'long enough' })).statusCode, 200);
    const res = await register(t, { email: newEmail(), password: 'long enough' });
    assert.equal(res.statusCode, 429);
    assert.ok(res.headers['retry-after']);
  });

  it('limits token refreshes per IP', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      statuses.push(
        (await t.app.inject({ method: 'GET', url: '/auth/token/refresh?refresh_token=x' })).statusCode,
      );
    }
    assert.deepEqual(statuses, [401, 401, 429]);
  });

  it('applies MAX_REQUESTS per client to every route but health, with X-RateLimit headers', async () => {
    let last = await t.app.inject({ method: 'GET', url: '/auth/jwks' });
    assert.equal(last.headers['x-ratelimit-limit'], '40');
    for (let i = 0; i < 40 && last.statusCode !== 429; i++)
      last = await t.app.inject({ method: 'GET', url: '/auth/jwks' });
    assert.equal(last.statusCode, 429);
    assert.ok(Number(last.headers['retry-after']) > 0);
    assert.equal((await t.app.inject({ method: 'GET', url: '/health' })).statusCode, 204);
    assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    const other = await t.app.inject({ method: 'GET', url: '/auth/jwks', remoteAddress: '10.0.0.9' });
    assert.equal(other.statusCode, 501, 'another client has its own count');
  });
});

describe('RATE_LIMIT_ENABLED=false', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', {
      ...HS,
      RATE_LIMIT_ENABLED: false,
      MAX_REQUESTS: 1,
      RATE_LIMIT_LOGIN_EMAIL_MAX: 1,
    });
  });
  after(() => t.close());

  it('turns every limit off', async () => {
    const s = await signUp(t);
    for (let i = 0; i < 5; i++)
      assert.equal((await login(t, { email: s.email, password: 'wrong' })).statusCode, 401);
    const res = await login(t, { email: s.email, password: s.password });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-ratelimit-limit'], undefined);
  });
});

if (process.env['REDIS_URL']) {
  describe('rate limits shared through Redis', () => {
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      const url = process.env['REDIS_URL'] as string;
      a = await buildTestApp('pglite', { ...HS, REDIS_URL: url, MAX_REQUESTS: 100_000 });
      // Two instances (each with its own database here; the email is registered in both) share one Redis.
      b = await buildTestApp('pglite', { ...HS, REDIS_URL: url, MAX_REQUESTS: 100_000 });
    });
    after(async () => {
      await a.close();
      await b.close();
    });

    it('counts failed logins for one email across two instances', async () => {
      const email = `shared-${randomBytes(6).toString('hex')}@example.com`;
      await register(a, { email, password: 'right password' });
      await register(b, { email, password: 'right password' });
      for (let i = 0; i < 10; i++) {
        const inst = i % 2 === 0 ? a : b;
        assert.equal((await login(inst, { email, password: 'wrong' })).statusCode, 401, `attempt ${i + 1}`);
      }
      const blockedA = await login(a, { email, password: 'right password' });
      const blockedB = await login(b, { email, password: 'right password' });
      assert.equal(blockedA.statusCode, 429);
      assert.equal(blockedB.statusCode, 429);
      assert.ok(Number(blockedB.headers['retry-after']) > 0);
    });
  });
}
