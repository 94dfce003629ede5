/**
 * Revocation across instances: two instances on one PostgreSQL database. A session ended on one has its
 * access tokens refused by the other within one second (LISTEN/NOTIFY), with no database read per request;
 * and when an instance loses the connection it listens on, it refuses a token revoked meanwhile all the
 * same (it checks the table until it listens again and has reloaded it). PostgreSQL only (PGlite serves
 * one process); without it the suite is reported as not run.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { openPostgres } from '../../src/db/database.ts';
import { bearer, HS, login, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';

const runs = runsHere('postgres', 'revocation across two instances (PostgreSQL)');

async function refusedWithin(t: TestApp, jwt: string, userId: string, ms: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const auth = await t.app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(jwt) });
    const storage = await t.app.inject({
      method: 'GET',
      url: `/storage/m/user/${userId}/nothing.txt`,
      headers: bearer(jwt),
    });
    if (auth.statusCode === 401 && storage.statusCode === 401) return Date.now() - started;
    if (Date.now() - started > ms)
      assert.fail(`still accepted after ${ms} ms: auth ${auth.statusCode}, storage ${storage.statusCode}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('revocation across two instances sharing PostgreSQL', { skip: !runs }, () => {
  let a: TestApp;
  let b: TestApp;
  before(async () => {
    const shared = await createTestDatabase('postgres');
    const settings = { ...HS, RATE_LIMIT_ENABLED: false };
    const clock = new TestClock(Date.now());
    a = await buildTestApp('postgres', settings, { database: shared, clock });
    const pool = openPostgres(shared.url as string, 5);
    b = await buildTestApp('postgres', settings, {
      database: { db: pool, url: shared.url, drop: () => pool.close() },
      clock,
    });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  async function twoSessions() {
    const s = await signUp(a);
    const other = (await login(a, { email: s.email, password: s.password, cookie: false })).json();
    return { s, other: other.jwt_token as string };
  }

  it('a session ended on one instance has its access token refused by the other within one second', async () => {
    const { s, other } = await twoSessions();
    assert.equal((await b.app.inject({ url: '/auth/sessions', headers: bearer(s.jwt) })).statusCode, 200);
    const sid = decodeJwt(s.jwt)['sid'] as string;
    const res = await a.app.inject({
      method: 'DELETE',
      url: `/auth/sessions/${sid}`,
      headers: bearer(other),
    });
    assert.equal(res.statusCode, 204);
    await refusedWithin(b, s.jwt, s.userId, 1000);
    assert.equal((await b.app.inject({ url: '/auth/sessions', headers: bearer(other) })).statusCode, 200);
  });

  it('an account signed out everywhere on one instance is refused by the other within one second', async () => {
    const { s, other } = await twoSessions();
    const res = await a.app.inject({ method: 'POST', url: '/auth/token/revoke', headers: bearer(s.jwt) });
    assert.equal(res.statusCode, 204);
    await refusedWithin(b, s.jwt, s.userId, 1000);
    await refusedWithin(b, other, s.userId, 1000);
  });

  it('after its listening connection drops, an instance still refuses a token revoked meanwhile, and listens again', async () => {
    const { s, other } = await twoSessions();
    // Cut every listening connection of this database (both instances'), as a network cut or a restarted
    // PostgreSQL would; the instances do not know yet.
    const killed = await a.ctx.db.query<{ n: number }>(
      'test-kill-listeners',
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE application_name = 'gatehouse-listen' AND datname = current_database()`,
    );
    assert.ok(Number(killed.rows[0]?.n) >= 2);
    const sid = decodeJwt(s.jwt)['sid'] as string;
    const res = await a.app.inject({
      method: 'DELETE',
      url: `/auth/sessions/${sid}`,
      headers: bearer(other),
    });
    assert.equal(res.statusCode, 204);
    // No notification reaches b; it must refuse the token all the same, within the second.
    await refusedWithin(b, s.jwt, s.userId, 1000);
    assert.equal((await b.app.inject({ url: '/auth/sessions', headers: bearer(other) })).statusCode, 200);
    // It listens again and trusts its (reloaded) list once more.
    const deadline = Date.now() + 10_000;
    while (!b.ctx.revocations.stats().trusted && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    assert.equal(b.ctx.revocations.stats().trusted, true);
    assert.equal(b.ctx.revocations.refuses({ userId: s.userId, sessionId: sid, issuedAt: 0 }), true);
    // And hears new revocations again.
    const third = (await login(a, { email: s.email, password: s.password, cookie: false })).json();
    const thirdSid = decodeJwt(third.jwt_token)['sid'] as string;
    await a.app.inject({ method: 'DELETE', url: `/auth/sessions/${thirdSid}`, headers: bearer(other) });
    await refusedWithin(b, third.jwt_token, s.userId, 1000);
  });
});
