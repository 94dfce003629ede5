/**
 * GET /auth/security-events: the owner's feed, newest first, in pages; bad paging is 400, and no page
 * ever holds another account's events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pruneSecurityFeed } from '../../src/events/feed.ts';
import { recordEvent } from '../../src/events/record.ts';
import { HS, login, signUp } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { accountIdOf, type FeedEvent, feed } from './helpers.ts';

for (const kind of dbKinds()) {
  describe(`GET /auth/security-events [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
    });
    after(() => t.close());

    it('answers 401 without a signed-in caller', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/auth/security-events' });
      assert.equal(res.statusCode, 401);
    });

    it('lists the caller’s sign-ins newest first, with method, client and session', async () => {
      const a = await signUp(t);
      t.clock.advance(1000);
      const res = await login(
        t,
        { email: a.email, password: a.password, cookie: false },
        { 'user-agent': 'FeedPhone/2.0' },
      );
      assert.equal(res.statusCode, 200, res.body);
      const events = (await feed(t, a.jwt)).json() as FeedEvent[];
      const signIns = events.filter((e) => e.type === 'sign_in');
      assert.equal(signIns.length, 2);
      const [newest] = signIns as [FeedEvent];
      assert.deepEqual(newest.details, { method: 'password' });
      assert.equal(newest.user_agent, 'FeedPhone/2.0');
      assert.equal(newest.ip, '127.0.0.1');
      assert.ok(newest.session_id);
      assert.deepEqual(Object.keys(newest).sort(), [
        'created_at',
        'details',
        'id',
        'ip',
        'session_id',
        'type',
        'user_agent',
      ]);
      assert.ok(Date.parse(events[0]?.created_at ?? '') >= Date.parse(events.at(-1)?.created_at ?? ''));
    });

    it('pages with limit and before, newest first, without repeating or skipping an event', async () => {
      const a = await signUp(t);
      for (let i = 0; i < 4; i++) {
        t.clock.advance(1000);
        await recordEvent(t.ctx, t.ctx.db, {
          type: 'provider_linked',
          accountId: await accountIdOf(t, a.userId),
          details: { provider: `p${i}` },
        });
      }
      const all = (await feed(t, a.jwt)).json() as FeedEvent[];
      const first = (await feed(t, a.jwt, '?limit=2')).json() as FeedEvent[];
      assert.equal(first.length, 2);
      const second = (await feed(t, a.jwt, `?limit=2&before=${first[1]?.id}`)).json() as FeedEvent[];
      const third = (await feed(t, a.jwt, `?limit=2&before=${second[1]?.id}`)).json() as FeedEvent[];
      assert.deepEqual(
        [...first, ...second, ...third].map((e) => e.id),
        all.map((e) => e.id),
      );
    });

    it('answers 400 to a limit outside 1..100 or a malformed before', async () => {
      const a = await signUp(t);
      for (const q of [
        '?limit=0',
        '?limit=101',
        '?limit=-1',
        '?limit=abc',
        '?limit=1.5',
        '?before=nope',
        '?before=',
        '?x=1',
      ]) {
        const res = await feed(t, a.jwt, q);
        assert.equal(res.statusCode, 400, `${q}: ${res.body}`);
        assert.deepEqual(Object.keys(res.json()).sort(), ['code', 'error', 'message', 'statusCode']);
      }
      assert.equal((await feed(t, a.jwt, '?limit=1')).statusCode, 200);
      assert.equal((await feed(t, a.jwt, '?limit=100')).statusCode, 200);
    });

    it('forgets events older than SECURITY_EVENTS_RETENTION_DAYS and keeps the younger ones', async () => {
      const a = await signUp(t);
      const accountId = await accountIdOf(t, a.userId);
      await recordEvent(t.ctx, t.ctx.db, { type: 'mfa_enabled', accountId, details: {} });
      t.clock.advance(60 * 86_400_000);
      await recordEvent(t.ctx, t.ctx.db, { type: 'mfa_disabled', accountId, details: {} });
      t.clock.advance(31 * 86_400_000);
      assert.equal(t.config.SECURITY_EVENTS_RETENTION_DAYS, 90);
      const pruned = await pruneSecurityFeed(t.ctx.db, t.clock, t.config.SECURITY_EVENTS_RETENTION_DAYS);
      assert.ok(pruned >= 2, `pruned ${pruned}`);
      const { rows } = await t.ctx.db.query<{ type: string }>(
        'test',
        'SELECT type FROM auth.security_events WHERE account_id = $1',
        [accountId],
      );
      assert.deepEqual(
        rows.map((r) => r.type),
        ['mfa_disabled'],
      );
    });

    it('never shows another account’s events, not even through its event id as a cursor (400)', async () => {
      const victim = await signUp(t);
      await login(t, { email: victim.email, password: 'wrong password!!' });
      const attacker = await signUp(t);
      const theirs = (await feed(t, victim.jwt)).json() as FeedEvent[];
      assert.ok(theirs.length >= 2);
      const mine = (await feed(t, attacker.jwt, '?limit=100')).json() as FeedEvent[];
      const theirIds = new Set(theirs.map((e) => e.id));
      assert.ok(mine.every((e) => !theirIds.has(e.id)));
      const { rows } = await t.ctx.db.query<{ account_id: string }>(
        'test',
        'SELECT DISTINCT account_id FROM auth.security_events WHERE id = ANY($1::uuid[])',
        [mine.map((e) => e.id)],
      );
      assert.deepEqual(
        rows.map((r) => r.account_id),
        [await accountIdOf(t, attacker.userId)],
      );
      const res = await feed(t, attacker.jwt, `?before=${theirs[0]?.id}`);
      assert.equal(res.statusCode, 400);
      assert.ok(!res.body.includes(theirs[0]?.id ?? 'x'));
    });
  });
}
