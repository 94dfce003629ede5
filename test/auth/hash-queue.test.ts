/**
 * PASSWORD_HASH_QUEUE: the hashing pool's bounded waiting line. A job that finds it full is refused at
 * once with 503 PASSWORD_HASHING_BUSY and an estimated Retry-After, on every path that hashes or checks a
 * password, for known and unknown emails alike; a rehash on login that finds it full is skipped.
 *
 * Each context has its own pool, sized by its settings: every configuration in this file uses one thread.
 * The tests hold that thread with a slow hash of their own (`occupy`), submitted to the same pool with a
 * large limit so that it always gets in, while the app's own limit is 1.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import Fastify, { type FastifyBaseLogger, type LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { findAccountByEmail } from '../../src/auth/accounts-store.ts';
import {
  type HashJob,
  HashPool,
  hashingBusy,
  isHashingBusy,
  observeVerifications,
  Passwords,
  retryAfterSeconds,
} from '../../src/auth/passwords.ts';
import { issueTicket } from '../../src/auth/tickets-store.ts';
import { AppError, logLevelOf } from '../../src/errors.ts';
import { installErrorHandling } from '../../src/http/error-handler.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { bearer, count, HS, login, newEmail, register, signUp } from './helpers.ts';

/** The settings of the apps under test: one hashing thread, one job allowed to wait. */
const CHEAP = {
  ARGON2_MEMORY_COST: 1024,
  ARGON2_TIME_COST: 1,
  ARGON2_PARALLELISM: 1,
  PASSWORD_HASH_THREADS: 1,
  PASSWORD_HASH_QUEUE: 1,
};

/** A hash of a few hundred milliseconds on `passwords`' pool, queued past any limit: it holds the one thread. */
const occupy = (passwords: Passwords) =>
  passwords.pool.run(
    {
      op: 'argon2-hash',
      password: 'occupying the hashing thread',
      options: { algorithm: 2, version: 1, memoryCost: 65536, timeCost: 10, parallelism: 1 },
    },
    1000,
  );

/** Holds the thread and fills the one waiting place; resolves when both jobs are done. */
function saturate(passwords: Passwords): Promise<unknown> {
  return Promise.all([occupy(passwords), occupy(passwords)]);
}

const slowJob = (password: string): HashJob => ({
  op: 'argon2-hash',
  password,
  options: { algorithm: 2, version: 1, memoryCost: 65536, timeCost: 8, parallelism: 1 },
});

async function refusal(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    assert.ok(isHashingBusy(err), `expected PASSWORD_HASHING_BUSY, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a PASSWORD_HASHING_BUSY refusal, the job was accepted');
}

function assertBusy(res: LightMyRequestResponse): void {
  assert.equal(res.statusCode, 503, res.body);
  const body = res.json();
  assert.equal(body.code, 'PASSWORD_HASHING_BUSY');
  assert.equal(body.message, 'The server is busy checking passwords; try again shortly.');
  const retryAfter = String(res.headers['retry-after']);
  assert.match(retryAfter, /^\d+$/);
  assert.ok(Number(retryAfter) >= 1, retryAfter);
}

/** The body of a 503 without its per-request id, for comparing answers. */
function sameParts(res: LightMyRequestResponse) {
  const { requestId: _id, ...rest } = res.json();
  return rest;
}

describe('retryAfterSeconds', () => {
  it('shares the jobs ahead over the threads at the mean duration, in whole seconds of at least 1', () => {
    assert.equal(retryAfterSeconds(10, 2, 300, 2), 2); // 12 × 300 ms / 2 = 1.8 s
    assert.equal(retryAfterSeconds(100, 4, 250, 4), 7); // 104 × 250 ms / 4 = 6.5 s
    assert.equal(retryAfterSeconds(64, 1, 1000, 1), 65);
    assert.equal(retryAfterSeconds(1, 1, 20, 1), 1, 'never below 1');
    assert.equal(retryAfterSeconds(0, 0, 0, 4), 1);
    assert.equal(retryAfterSeconds(5, 1, Number.NaN, 1), 1, 'no nonsense from a bad measurement');
  });
});

describe('HashPool limit', () => {
  it('refuses a job when the waiting line is full, and accepts again once it drains', async () => {
    const pool = new HashPool(1);
    const first = pool.run(slowJob('a'), 1);
    const second = pool.run(slowJob('b'), 1);
    assert.deepEqual(
      { waiting: pool.stats.waiting, running: pool.stats.running },
      { waiting: 1, running: 1 },
    );
    const refused = await refusal(pool.run(slowJob('c'), 1));
    assert.equal(refused.statusCode, 503);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    // The refusal took no place in the line.
    assert.equal(pool.stats.waiting, 1);
    await Promise.all([first, second]);
    assert.deepEqual(
      { waiting: pool.stats.waiting, running: pool.stats.running },
      { waiting: 0, running: 0 },
    );
    const mean = pool.stats.meanMs;
    assert.ok(mean !== undefined && mean > 0, `measured mean: ${mean}`);

    // With a measured mean, the estimate is the documented one: (waiting + running) × mean ÷ threads.
    const third = pool.run(slowJob('d'), 1);
    const fourth = pool.run(slowJob('e'), 1);
    const { waiting, running, meanMs } = pool.stats;
    const expected = retryAfterSeconds(waiting, running, meanMs as number, 1);
    const again = await refusal(pool.run(slowJob('f'), 1));
    assert.equal(again.headers['retry-after'], String(expected));
    assert.equal(typeof (await third), 'string');
    assert.equal(typeof (await fourth), 'string');
  });

  it('with no waiting allowed, runs a job on a free thread and refuses one that would wait', async () => {
    const pool = new HashPool(1);
    const running = pool.run(slowJob('x'), 0);
    await refusal(pool.run(slowJob('y'), 0));
    assert.match(String(await running), /^\$argon2id\$/);
    assert.match(String(await pool.run(slowJob('z'), 0)), /^\$argon2id\$/, 'the thread is free again');
  });
});

describe('password functions on a full hashing queue', () => {
  it('refuse with PASSWORD_HASHING_BUSY instead of answering false', async () => {
    const passwords = new Passwords(CHEAP);
    const stored = await passwords.hash('the password');
    // The dummy of the configured kind is made now, so that below only its verification is refused.
    assert.equal(await passwords.verifyDummy('anything'), false);
    const full = saturate(passwords);
    try {
      await refusal(passwords.hash('new password'));
      await refusal(passwords.verify(stored, 'the password'));
      await refusal(passwords.verifyDummy('anything'));
      // Unknown email and known account alike.
      await refusal(passwords.checkLogin(null, 'anything', async () => []));
      await refusal(passwords.checkLogin(stored, 'the password', async () => []));
    } finally {
      await full;
    }
    assert.equal(await passwords.verify(stored, 'the password'), true, 'accepted again once drained');
    await passwords.close();
  });

  it('refuse with PASSWORD_HASHING_BUSY when the dummy hash itself cannot be made yet', async () => {
    // No dummy exists in a fresh instance: making it is what is refused, and that is a 503 too, never a
    // quick false that would tell an unknown email from a known one.
    const passwords = new Passwords(CHEAP);
    const full = saturate(passwords);
    try {
      await refusal(passwords.verifyDummy('anything'));
      await refusal(passwords.checkLogin(null, 'anything', async () => []));
    } finally {
      await full;
    }
    assert.equal(await passwords.verifyDummy('anything'), false, 'made once drained');
    await passwords.close();
  });

  it('refuse every job once closed, and close the threads', async () => {
    const passwords = new Passwords(CHEAP);
    await passwords.hash('starts the thread');
    await passwords.close();
    await assert.rejects(passwords.hash('after close'), /closed/);
    assert.deepEqual(passwords.stats(), { waiting: 0, running: 0, threads: 1 });
  });
});

describe('refusals in the log', () => {
  it('logs PASSWORD_HASHING_BUSY and other deliberate 503s at warn, faults at error, 4xx not at all', async () => {
    assert.equal(logLevelOf('PASSWORD_HASHING_BUSY'), 'warn');
    assert.equal(logLevelOf('IMAGE_QUEUE_FULL'), 'warn');
    assert.equal(logLevelOf('EMAILS_DISABLED'), 'warn');
    assert.equal(logLevelOf('SHUTTING_DOWN'), 'warn');
    assert.equal(logLevelOf('SERVICE_UNAVAILABLE'), 'error');
    assert.equal(logLevelOf('PASSWORD_CHECK_UNAVAILABLE'), 'error');
    assert.equal(logLevelOf('INVALID_CREDENTIALS'), undefined);

    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    const app = Fastify({ loggerInstance: pino({ level: 'info' }, sink) as unknown as FastifyBaseLogger });
    installErrorHandling(app);
    app.get('/busy', async () => {
      throw hashingBusy(3);
    });
    app.get('/down', async () => {
      throw new AppError('SERVICE_UNAVAILABLE');
    });
    app.get('/denied', async () => {
      throw new AppError('INVALID_CREDENTIALS');
    });
    try {
      const busy = await app.inject({ method: 'GET', url: '/busy' });
      assertBusy(busy);
      assert.equal(busy.headers['retry-after'], '3');
      assert.equal((await app.inject({ method: 'GET', url: '/down' })).statusCode, 503);
      assert.equal((await app.inject({ method: 'GET', url: '/denied' })).statusCode, 401);
    } finally {
      await app.close();
    }
    const level = (msg: string) => lines.filter((l) => l.msg === msg).map((l) => l.level);
    assert.deepEqual(level('The server is busy checking passwords; try again shortly.'), [40]);
    assert.deepEqual(level('A service this request needs is unavailable.'), [50]);
    assert.deepEqual(level('Username and password do not match'), []);
  });
});

for (const kind of dbKinds()) {
  describe(`password hashing queue over HTTP [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        LOST_PASSWORD_ENABLED: true,
        ...CHEAP,
      });
    });
    after(() => t.close());

    it('lets a burst of logins through as far as the queue allows and answers the rest 503 with Retry-After', async () => {
      const s = await signUp(t);
      const blocker = occupy(t.ctx.passwords);
      const burst = await Promise.all(
        Array.from({ length: 16 }, () => login(t, { email: s.email, password: s.password, cookie: false })),
      );
      await blocker;
      const statuses = burst.map((r) => r.statusCode);
      assert.ok(
        statuses.every((c) => c === 200 || c === 503),
        `statuses: ${statuses}`,
      );
      assert.ok(statuses.includes(200), `some get in: ${statuses}`);
      assert.ok(statuses.includes(503), `the rest are refused: ${statuses}`);
      for (const r of burst) {
        if (r.statusCode === 503) assertBusy(r);
        else assert.ok(r.json().jwt_token);
      }
      // Drained: the next login goes through.
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
    });

    it('answers known and unknown emails the same 503 under the same pressure (no enumeration)', async () => {
      const s = await signUp(t);
      // The dummy hash exists already; a burst of unknown emails must not find a shortcut either way.
      assert.equal((await login(t, { email: newEmail('nobody'), password: 'x' })).statusCode, 401);
      const full = saturate(t.ctx.passwords);
      const [known, wrong, unknown, fresh] = await Promise.all([
        login(t, { email: s.email, password: s.password }),
        login(t, { email: s.email, password: 'not the password' }),
        login(t, { email: newEmail('nobody'), password: 'not the password' }),
        login(t, { email: newEmail('never-seen'), password: s.password }),
      ]);
      await full;
      for (const r of [known, wrong, unknown, fresh]) assertBusy(r);
      assert.deepEqual(sameParts(unknown), sameParts(known));
      assert.deepEqual(sameParts(fresh), sameParts(wrong));
      // A refusal is not a failed attempt: the account can sign in at once.
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
      assert.equal((await login(t, { email: newEmail('nobody'), password: 'x' })).statusCode, 401);
    });

    it('refuses a registration with 503 and creates no account', async () => {
      const email = newEmail('busy-register');
      const full = saturate(t.ctx.passwords);
      const res = await register(t, { email, password: 'a fine password', cookie: false });
      await full;
      assertBusy(res);
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE email = $1', [email]),
        0,
      );
      assert.equal((await register(t, { email, password: 'a fine password' })).statusCode, 200);
    });

    it('refuses a password change with 503 and keeps the old password', async () => {
      const s = await signUp(t);
      const full = saturate(t.ctx.passwords);
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password',
        payload: { old_password: s.password, new_password: 'brand new password' },
        headers: bearer(s.jwt),
      });
      await full;
      assertBusy(res);
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
      assert.equal((await login(t, { email: s.email, password: 'brand new password' })).statusCode, 401);
    });

    it('refuses a password reset with 503 and leaves its ticket usable', async () => {
      const s = await signUp(t);
      const account = await findAccountByEmail(t.ctx.db, s.email);
      assert.ok(account);
      const { ticket } = await issueTicket(t.ctx.db, t.config, t.clock.now(), {
        accountId: account.id,
        purpose: 'password-reset',
      });
      const reset = () =>
        t.app.inject({
          method: 'POST',
          url: '/auth/change-password/change',
          payload: { ticket, new_password: 'reset password' },
        });
      const full = saturate(t.ctx.passwords);
      const res = await reset();
      await full;
      assertBusy(res);
      assert.equal((await login(t, { email: s.email, password: s.password })).statusCode, 200);
      assert.equal((await reset()).statusCode, 204, 'the ticket was not used up by the refusal');
      assert.equal((await login(t, { email: s.email, password: 'reset password' })).statusCode, 200);
    });

    // Last: it leaves a bcrypt kind in the cached list of kinds in use.
    it('signs in with a legacy hash when its rehash finds the queue full, and rehashes on a later login', async () => {
      const s = await signUp(t);
      const legacy = bcrypt.hashSync('hbp password', 4);
      await t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = $2 WHERE email = $1', [
        s.email,
        legacy,
      ]);
      const hashOf = async () =>
        (
          await t.ctx.db.query<{ h: string }>(
            't',
            'SELECT password_hash AS h FROM auth.accounts WHERE email = $1',
            [s.email],
          )
        ).rows[0]?.h;

      // Right after the bcrypt check starts (it takes the free thread), two slow jobs queue behind it:
      // when it finishes, one of them runs and the other fills the app's one waiting place.
      let behind: Promise<unknown> | undefined;
      const stop = observeVerifications((e) => {
        if (e.dummy || !e.kind.startsWith('bcrypt')) return;
        stop();
        queueMicrotask(() => {
          behind = saturate(t.ctx.passwords);
        });
      });
      const res = await login(t, { email: s.email, password: 'hbp password', cookie: false });
      stop();
      assert.ok(behind, 'the bcrypt verification ran');
      await behind;
      assert.equal(res.statusCode, 200, res.body);
      assert.ok(res.json().jwt_token);
      assert.equal(await hashOf(), legacy, 'the rehash was skipped');

      const later = await login(t, { email: s.email, password: 'hbp password' });
      assert.equal(later.statusCode, 200);
      assert.match((await hashOf()) ?? '', /^\$argon2id\$/);
    });
  });
}
