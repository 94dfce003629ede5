import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/app.ts';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { buildTestApp, type TestApp, tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';
import { bearer, HS, login, newEmail, register, type Signed, signUp } from './helpers.ts';

// Rate limits live outside the database: the lockout suites run on both databases (the account lookups
// are the database's part), the suites about addresses and limits on PGlite only.
const A = '203.0.113.10';
const B = '198.51.100.20';

/** A login from a given client address (inject's socket address). */
const loginFrom = (t: TestApp, address: string, body: Record<string, unknown>, headers = {}) =>
  t.app.inject({ method: 'POST', url: '/auth/login', payload: body, remoteAddress: address, headers });

for (const kind of dbKinds()) {
  describe(`failed sign-ins in memory: per account and address, with growing waits [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, MAX_REQUESTS: 10_000 });
    });
    after(() => t.close());

    it('ten wrong passwords from one address do not stop the owner signing in from another', async () => {
      const s = await signUp(t);
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        statuses.push((await loginFrom(t, A, { email: s.email, password: `wrong ${i}` })).statusCode);
        t.clock.advance(100);
      }
      assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
      assert.ok(
        statuses.slice(5).every((c) => c === 429 || c === 401) && statuses.includes(429),
        String(statuses),
      );
      const owner = await loginFrom(t, B, { email: s.email, password: s.password });
      assert.equal(owner.statusCode, 200, owner.body);
      // The stranger stays slowed down, even with the right password.
      assert.equal((await loginFrom(t, A, { email: s.email, password: s.password })).statusCode, 429);
    });

    it('after RATE_LIMIT_LOGIN_ACCOUNT_MAX failures each further attempt waits twice as long', async () => {
      const s = await signUp(t);
      for (let i = 0; i < 5; i++)
        assert.equal((await loginFrom(t, A, { email: s.email, password: 'wrong' })).statusCode, 401, `${i}`);
      for (const waitS of [1, 2, 4, 8]) {
        const early = await loginFrom(t, A, { email: s.email, password: 'wrong' });
        assert.equal(early.statusCode, 429, `before the ${waitS}s wait`);
        assert.equal(early.headers['retry-after'], String(waitS));
        assert.match(early.json().message, /wait/);
        t.clock.advance(waitS * 1000);
        assert.equal((await loginFrom(t, A, { email: s.email, password: 'wrong' })).statusCode, 401);
      }
      t.clock.advance(16_000);
      // A right password ends the waits for this address.
      assert.equal((await loginFrom(t, A, { email: s.email, password: s.password })).statusCode, 200);
      for (let i = 0; i < 5; i++)
        assert.equal((await loginFrom(t, A, { email: s.email, password: 'wrong' })).statusCode, 401);
    });

    it('never waits longer than RATE_LIMIT_LOGIN_DELAY_MAX, and forgets after RATE_LIMIT_LOGIN_ACCOUNT_WINDOW of quiet', async () => {
      const s = await signUp(t);
      const C = '203.0.113.30';
      let last = 0;
      for (let i = 0; i < 40; i++) {
        const res = await loginFrom(t, C, { email: s.email, password: 'wrong' });
        if (res.statusCode === 429) {
          last = Number(res.headers['retry-after']);
          assert.ok(last <= 900, String(last));
          t.clock.advance(last * 1000);
        }
      }
      assert.equal(last, 900, 'the wait reached the cap');
      // Waiting out the longest wait does not forget the failures; an hour of quiet does.
      assert.equal((await loginFrom(t, C, { email: s.email, password: 'wrong' })).statusCode, 401);
      assert.equal((await loginFrom(t, C, { email: s.email, password: 'wrong' })).statusCode, 429);
      t.clock.advance(3_600_000);
      for (let i = 0; i < 5; i++)
        assert.equal((await loginFrom(t, C, { email: s.email, password: 'wrong' })).statusCode, 401);
    });

    it('refuses a burst of parallel guesses past the free ones, not after the fact', async () => {
      const s = await signUp(t);
      const burst = await Promise.all(
        Array.from({ length: 20 }, () => loginFrom(t, '203.0.113.40', { email: s.email, password: 'wrong' })),
      );
      const codes = burst.map((r) => r.statusCode);
      assert.equal(codes.filter((c) => c === 401).length, 5, String(codes));
      assert.equal(codes.filter((c) => c === 429).length, 15);
    });

    it('does not count successful logins against the account', async () => {
      const s = await signUp(t);
      for (let i = 0; i < 15; i++)
        assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
    });

    it('slows an unknown email exactly like a known one (no enumeration)', async () => {
      const known = await signUp(t);
      const answers = async (email: string) => {
        const out: string[] = [];
        for (let i = 0; i < 7; i++) {
          const r = await loginFrom(t, B, { email, password: 'wrong' });
          out.push(`${r.statusCode} ${r.headers['retry-after'] ?? ''}`);
        }
        return out;
      };
      assert.deepEqual(await answers(known.email), await answers(newEmail('nobody')));
    });
  });

  describe(`per-address failure budget across accounts, old_password and admin secrets [${kind}]`, () => {
    let t: TestApp;
    const ADMIN = 'an-admin-secret-of-at-least-32-characters';
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        MAX_REQUESTS: 10_000,
        RATE_LIMIT_IP_FAILURES_MAX: 8,
        HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
        USER_IMPERSONATION_ENABLED: true,
      });
    });
    after(() => t.close());

    it('stops one address guessing many accounts with 429, and no other address', async () => {
      const C = '192.0.2.77';
      const victims = await Promise.all(Array.from({ length: 9 }, () => signUp(t)));
      for (const v of victims.slice(0, 8))
        assert.equal((await loginFrom(t, C, { email: v.email, password: 'Password1' })).statusCode, 401);
      const ninth = await loginFrom(t, C, { email: (victims[8] as Signed).email, password: 'Password1' });
      assert.equal(ninth.statusCode, 429);
      assert.match(ninth.json().message, /from this address/);
      assert.ok(Number(ninth.headers['retry-after']) > 0);
      // Even the right password of a fresh account waits: the budget is spent before anything is checked.
      const v = victims[8] as Signed;
      assert.equal((await loginFrom(t, C, { email: v.email, password: v.password })).statusCode, 429);
      assert.equal((await loginFrom(t, B, { email: v.email, password: v.password })).statusCode, 200);
      t.clock.advance(900_000);
      assert.equal((await loginFrom(t, C, { email: v.email, password: v.password })).statusCode, 200);
    });

    it('throttles wrong old_password guesses made with a stolen access token', async () => {
      const s = await signUp(t);
      const thief = '192.0.2.88';
      const change = (address: string, old: string, jwt = s.jwt) =>
        t.app.inject({
          method: 'POST',
          url: '/auth/change-password',
          payload: { old_password: old, new_password: 'the thief wants this' },
          headers: bearer(jwt),
          remoteAddress: address,
        });
      for (let i = 0; i < 5; i++) assert.equal((await change(thief, `guess ${i}`)).statusCode, 401);
      const held = await change(thief, 'guess 5');
      assert.equal(held.statusCode, 429);
      // The right password from the thief's address is refused while it waits: a guess tells nothing.
      assert.equal((await change(thief, s.password)).statusCode, 429);
      // They count against the address's budget for sign-ins too.
      for (let i = 0; i < 3; i++)
        assert.equal((await loginFrom(t, thief, { email: newEmail(), password: 'x' })).statusCode, 401);
      assert.equal((await loginFrom(t, thief, { email: newEmail(), password: 'x' })).statusCode, 429);
      // The owner, elsewhere, changes the password.
      assert.equal((await change(B, s.password)).statusCode, 204);
    });

    it('throttles wrong admin-secret guesses at storage and at login impersonation', async () => {
      const s = await signUp(t);
      const guesser = '192.0.2.99';
      const key = `/storage/o/user/${s.userId}/f.txt`;
      const up = await t.app.inject({
        method: 'POST',
        url: key,
        payload: 'f',
        headers: { ...bearer(s.jwt), 'content-type': 'text/plain' },
      });
      assert.equal(up.statusCode, 200, up.body);
      const revoke = (address: string, secret: string) =>
        t.app.inject({
          method: 'POST',
          url: `/storage/m/user/${s.userId}/f.txt`,
          payload: { action: 'revoke-token' },
          headers: { 'x-admin-secret': secret },
          remoteAddress: address,
        });
      for (let i = 0; i < 5; i++) assert.equal((await revoke(guesser, `guess-${i}`)).statusCode, 403);
      assert.equal((await revoke(guesser, 'guess-5')).statusCode, 429);
      assert.equal((await revoke(guesser, ADMIN)).statusCode, 429, 'the right secret waits too');
      assert.equal((await revoke(B, ADMIN)).statusCode, 200, 'an admin elsewhere is served');
      // Impersonation at login shares the admin-secret count.
      const impersonate = (address: string, secret: string) =>
        loginFrom(t, address, { email: s.email }, { 'x-admin-secret': secret });
      assert.equal((await impersonate(guesser, 'guess-6')).statusCode, 429);
      const other = '192.0.2.100';
      for (let i = 0; i < 5; i++) {
        const r = await impersonate(other, `guess-${i}`);
        assert.equal(r.statusCode, 401);
        assert.equal(r.json().message, 'Invalid x-admin-secret');
      }
      assert.equal((await impersonate(other, 'guess-5')).statusCode, 429);
      assert.equal((await impersonate(B, ADMIN)).statusCode, 200);
    });
  });
}

describe('client addresses behind a proxy (TRUST_PROXY)', () => {
  let t: TestApp;
  const PROXY = '10.0.0.1';
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, MAX_REQUESTS: 10_000, TRUST_PROXY: ['10.0.0.0/24'] });
  });
  after(() => t.close());

  it('believes X-Forwarded-For from the configured proxy: a stranger behind it cannot slow the owner', async () => {
    const s = await signUp(t);
    for (let i = 0; i < 5; i++) {
      const r = await loginFrom(t, PROXY, { email: s.email, password: 'wrong' }, { 'x-forwarded-for': A });
      assert.equal(r.statusCode, 401);
    }
    assert.equal(
      (await loginFrom(t, PROXY, { email: s.email, password: 'wrong' }, { 'x-forwarded-for': A })).statusCode,
      429,
    );
    const owner = await loginFrom(
      t,
      PROXY,
      { email: s.email, password: s.password },
      { 'x-forwarded-for': B },
    );
    assert.equal(owner.statusCode, 200, owner.body);
  });

  it('ignores X-Forwarded-For from an untrusted peer, so a direct client cannot pick its address', async () => {
    const s = await signUp(t);
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const spoofed = { 'x-forwarded-for': `198.51.100.${i + 1}` };
      statuses.push((await loginFrom(t, A, { email: s.email, password: 'wrong' }, spoofed)).statusCode);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429]);
  });
});

describe('X-Forwarded-For from a peer TRUST_PROXY does not name', () => {
  it('is logged once, naming the peer, so a missing TRUST_PROXY behind a balancer is noticed', async () => {
    const lines: { msg?: string; peer?: string; level?: number }[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const dir = tempDir();
    const config = configFrom({
      ...HS,
      DATA_DIR: dir,
      CUSTOM_DIR: path.join(dir, 'custom'),
      STORAGE_ENABLED: false,
    });
    const database = await createTestDatabase('pglite');
    const log = pino({ level: 'warn' }, sink);
    const ctx = await createContext(config, { log, db: database.db });
    const app = await buildApp(ctx, { logger: log });
    try {
      for (const peer of ['10.9.9.9', '10.9.9.8'])
        await app.inject({ url: '/auth/jwks', remoteAddress: peer, headers: { 'x-forwarded-for': A } });
      await app.inject({ url: '/auth/jwks', remoteAddress: '10.9.9.7' });
      const warnings = lines.filter((l) => l.msg?.includes('X-Forwarded-For'));
      assert.equal(warnings.length, 1, JSON.stringify(lines));
      assert.equal(warnings[0]?.peer, '10.9.9.9');
      assert.match(warnings[0]?.msg ?? '', /set TRUST_PROXY/);
    } finally {
      await app.close();
      await closeContext(ctx);
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('TRUST_PROXY as a hop count', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, MAX_REQUESTS: 10_000, TRUST_PROXY: 1 });
  });
  after(() => t.close());

  it('believes the nearest hop (Fastify alone would believe none)', async () => {
    const s = await signUp(t);
    for (let i = 0; i < 5; i++)
      await loginFrom(t, '10.1.1.1', { email: s.email, password: 'wrong' }, { 'x-forwarded-for': A });
    const owner = await loginFrom(
      t,
      '10.1.1.1',
      { email: s.email, password: s.password },
      { 'x-forwarded-for': `${A}, ${B}` },
    );
    assert.equal(owner.statusCode, 200, 'the last hop, B, is the client');
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
      RATE_LIMIT_LOGIN_ACCOUNT_MAX: 1,
      RATE_LIMIT_IP_FAILURES_MAX: 1,
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

if (runsHere('redis', 'rate limits shared through Redis')) {
  describe('rate limits shared through Redis', () => {
    let a: TestApp;
    let b: TestApp;
    // Redis outlives a run and is shared with other runs: every address and email here is new.
    const address = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
    before(async () => {
      const url = process.env['REDIS_URL'] as string;
      const settings = { ...HS, REDIS_URL: url, MAX_REQUESTS: 100_000, RATE_LIMIT_IP_FAILURES_MAX: 8 };
      a = await buildTestApp('pglite', settings);
      // Two instances (each with its own database here; the email is registered in both) share one Redis.
      b = await buildTestApp('pglite', settings);
    });
    after(async () => {
      await a.close();
      await b.close();
    });

    it('counts failures of one account from one address across instances, and never slows the owner elsewhere', async () => {
      const email = `shared-${randomBytes(6).toString('hex')}@example.com`;
      await register(a, { email, password: 'right password' });
      await register(b, { email, password: 'right password' });
      const stranger = address();
      for (let i = 0; i < 5; i++) {
        const inst = i % 2 === 0 ? a : b;
        const res = await loginFrom(inst, stranger, { email, password: 'wrong' });
        assert.equal(res.statusCode, 401, `attempt ${i + 1}`);
      }
      const blockedA = await loginFrom(a, stranger, { email, password: 'right password' });
      const blockedB = await loginFrom(b, stranger, { email, password: 'right password' });
      assert.equal(blockedA.statusCode, 429);
      assert.equal(blockedB.statusCode, 429);
      assert.ok(Number(blockedB.headers['retry-after']) > 0);
      const owner = address();
      assert.equal((await loginFrom(a, owner, { email, password: 'right password' })).statusCode, 200);
      assert.equal((await loginFrom(b, owner, { email, password: 'right password' })).statusCode, 200);
    });

    it('shares the per-address failure budget across instances', async () => {
      const guesser = address();
      for (let i = 0; i < 8; i++) {
        const inst = i % 2 === 0 ? a : b;
        assert.equal((await loginFrom(inst, guesser, { email: newEmail(), password: 'x' })).statusCode, 401);
      }
      assert.equal((await loginFrom(a, guesser, { email: newEmail(), password: 'x' })).statusCode, 429);
      assert.equal((await loginFrom(b, guesser, { email: newEmail(), password: 'x' })).statusCode, 429);
    });

    it('refuses a burst of parallel guesses past the free ones', async () => {
      const email = newEmail('burst');
      const from = address();
      const burst = await Promise.all(
        Array.from({ length: 12 }, (_, i) => loginFrom(i % 2 ? a : b, from, { email, password: 'wrong' })),
      );
      const codes = burst.map((r) => r.statusCode);
      assert.equal(codes.filter((c) => c === 401).length, 5, String(codes));
    });
  });
}
