/**
 * Webhooks (WEBHOOK_URL): every change becomes a delivery written in the change's transaction and sent
 * after the commit by the outbox's sender, signed as Standard Webhooks. A receiver in the test verifies
 * every delivery with the `standardwebhooks` package. With the receiver down for a while and then up,
 * every event arrives, in order per user, duplicates only with the same webhook-id; a change rolled back
 * sends nothing; deliveries given up show in /metrics and `gatehouse webhooks list-failed`.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { runCli } from '../../src/cli/main.ts';
import { ConfigError } from '../../src/config.ts';
import { recordEvent } from '../../src/events/record.ts';
import { login, register } from '../auth/helpers.ts';
import { HS, newEmail } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';

const SECRET = `whsec_${Buffer.from('another-test-secret-of-32-bytes!!!').toString('base64')}`;
const PASSWORD = 'correct horse battery';

interface Received {
  id: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** An HTTP receiver that verifies every request; while `down`, it answers 503 after verifying. */
class Receiver {
  readonly got: Received[] = [];
  readonly forged: number[] = [];
  down = false;
  /** Records a delivery, then answers 500 the first time it sees its id (processed, but the answer lost). */
  flaky = false;
  private readonly seen = new Set<string>();
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    const verifier = new Webhook(SECRET);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body: Omit<Received, 'id'>;
        try {
          body = verifier.verify(
            Buffer.concat(chunks).toString('utf8'),
            req.headers as Record<string, string>,
          ) as Omit<Received, 'id'>;
        } catch {
          this.forged.push(1);
          res.writeHead(400).end();
          return;
        }
        if (this.down) {
          res.writeHead(503).end();
          return;
        }
        const id = req.headers['webhook-id'] as string;
        this.got.push({ id, ...body });
        if (this.flaky && !this.seen.has(id)) {
          this.seen.add(id);
          res.writeHead(500).end();
          return;
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The deliveries the outbox holds, in insertion order. */
async function queued(t: TestApp) {
  const { rows } = await t.ctx.db.query<{
    delivery_id: string;
    template: string;
    ordering_key: string | null;
    sent: boolean;
  }>(
    'test-queued',
    `SELECT delivery_id, template, ordering_key, sent_at IS NOT NULL AS sent
       FROM auth.email_outbox WHERE kind = 'webhook' ORDER BY id`,
  );
  return rows;
}

const FAST = {
  WEBHOOK_RETRY_DELAY_MS: 50,
  WEBHOOK_RETRY_MAX_DELAY_MS: 200,
  EMAIL_POLL_INTERVAL_MS: 50,
  EMAIL_CLAIM_TIMEOUT_MS: 2000,
};

for (const kind of dbKinds()) {
  describe(`webhooks [${kind}]`, () => {
    let t: TestApp;
    const receiver = new Receiver();
    before(async () => {
      await receiver.start();
      t = await buildTestApp(kind, {
        ...HS,
        ...FAST,
        RATE_LIMIT_ENABLED: false,
        WEBHOOK_URL: [receiver.url],
        WEBHOOK_SECRET: SECRET,
        // Fails a sign-in of an address starting with "rollback": its registration is rolled back.
        JWT_CLAIMS_FUNCTION: 'public.test_claims',
      });
      await t.ctx.db.exec(`
        CREATE FUNCTION public.test_claims(user_id uuid, claims jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
        BEGIN
          IF (SELECT email::text FROM auth.accounts a WHERE a.user_id = test_claims.user_id) LIKE 'rollback%' THEN
            RAISE EXCEPTION 'refused';
          END IF;
          RETURN NULL;
        END $$;`);
    });
    after(async () => {
      await t.close();
      await receiver.stop();
    });

    it('delivers every event after the receiver comes back, in order per user, duplicates only with the same webhook-id', async () => {
      receiver.down = true;
      receiver.got.length = 0;
      const users: string[] = [];
      for (let i = 0; i < 3; i++) {
        const email = newEmail('hook');
        const r = await register(t, { email, password: PASSWORD, cookie: false });
        assert.equal(r.statusCode, 200, r.body);
        users.push(r.json().user.id);
        for (let j = 0; j < 2; j++) {
          const l = await login(t, { email, password: PASSWORD, cookie: false });
          assert.equal(l.statusCode, 200, l.body);
        }
        // A file of the user's own: file.uploaded, then file.deleted.
        const jwt = r.json().jwt_token as string;
        const mp = multipartBody([{ name: 'file', filename: 'a.txt', type: 'text/plain', data: 'hello' }]);
        const url = `/storage/o/user/${r.json().user.id}/a.txt`;
        const up = await t.app.inject({
          method: 'POST',
          url,
          payload: mp.payload,
          headers: { ...mp.headers, authorization: `Bearer ${jwt}` },
        });
        assert.equal(up.statusCode, 200, up.body);
        const del = await t.app.inject({
          method: 'DELETE',
          url,
          headers: { authorization: `Bearer ${jwt}` },
        });
        assert.equal(del.statusCode, 204, del.body);
      }
      // Down: attempts are made and refused, nothing is delivered yet.
      await until('a refused attempt', async () => {
        const { rows } = await t.ctx.db.query<{ n: number }>(
          'test-attempts',
          `SELECT count(*)::int AS n FROM auth.email_outbox WHERE kind = 'webhook' AND last_error IS NOT NULL`,
        );
        return Number(rows[0]?.n) > 0;
      });
      assert.equal(receiver.got.length, 0);
      receiver.down = false;
      const expected = await queued(t);
      assert.equal(expected.length, 3 * 6, 'user.created, 3 × session.created, file.uploaded, file.deleted');
      await until('every delivery', () => new Set(receiver.got.map((g) => g.id)).size === expected.length);
      assert.equal(receiver.forged.length, 0, 'every delivery verifies');
      // Duplicates (at least once) only ever repeat an id with the same body.
      const byId = new Map<string, string>();
      for (const g of receiver.got) {
        const body = JSON.stringify({ type: g.type, timestamp: g.timestamp, data: g.data });
        const seen = byId.get(g.id);
        if (seen !== undefined) assert.equal(seen, body, 'a duplicate is the same delivery');
        byId.set(g.id, body);
      }
      for (const user of users) {
        const want = expected.filter((e) => e.ordering_key === user).map((e) => e.delivery_id);
        const firstSeen: string[] = [];
        for (const g of receiver.got)
          if (g.data.user_id === user && !firstSeen.includes(g.id)) firstSeen.push(g.id);
        assert.deepEqual(firstSeen, want, 'in order per user');
        const types = receiver.got
          .filter((g) => g.data.user_id === user)
          .map((g) => g.type)
          .filter((ty, i, all) => i === 0 || ty !== all[i - 1] || ty === 'session.created');
        assert.deepEqual(
          [...new Set(types)],
          ['user.created', 'session.created', 'file.uploaded', 'file.deleted'],
          'the types of the issue',
        );
      }
      const created = receiver.got.find((g) => g.type === 'user.created' && g.data.user_id === users[0]);
      assert.deepEqual(Object.keys(created?.data ?? {}).sort(), ['active', 'email', 'user_id']);
      const session = receiver.got.find((g) => g.type === 'session.created');
      assert.equal(session?.data.method, 'password');
      assert.match(String(session?.data.session_id), /^[0-9a-f-]{36}$/);
      const file = receiver.got.find((g) => g.type === 'file.uploaded');
      assert.deepEqual(Object.keys(file?.data ?? {}).sort(), ['content_type', 'key', 'size', 'user_id']);
      // Ids and non-secret fields only.
      const fields = new Set(receiver.got.flatMap((g) => Object.keys(g.data)));
      const allowed = ['user_id', 'email', 'active', 'session_id', 'method', 'key', 'size', 'content_type'];
      assert.deepEqual(
        [...fields].filter((f) => !allowed.includes(f)),
        [],
      );
    });

    it("turns the security feed's account events into webhooks, in the event's transaction", async () => {
      receiver.got.length = 0;
      const email = newEmail('feed');
      const r = await register(t, { email, password: PASSWORD, cookie: false });
      assert.equal(r.statusCode, 200, r.body);
      const userId = r.json().user.id as string;
      const { rows } = await t.ctx.db.query<{ id: string }>(
        'test-account',
        'SELECT id FROM auth.accounts WHERE user_id = $1',
        [userId],
      );
      const accountId = rows[0]?.id as string;
      const session = '7b0c6a2e-2f4b-4a57-9a53-6d1c7f3c2a10';
      await t.ctx.db.transaction(async (tx) => {
        const deps = { clock: t.clock, webhooks: t.ctx.webhooks };
        await recordEvent(deps, tx, {
          type: 'session_ended',
          accountId,
          details: { reason: 'logout', sessions: [session] },
        });
        await recordEvent(deps, tx, { type: 'password_reset', accountId, details: {} });
        await recordEvent(deps, tx, { type: 'mfa_enabled', accountId, details: {} });
        await recordEvent(deps, tx, { type: 'email_changed', accountId, details: { confirmed: true } });
        await recordEvent(deps, tx, { type: 'account_disabled', accountId, details: { by: 'operator' } });
        // No webhook for these.
        await recordEvent(deps, tx, { type: 'sign_in_failed', accountId, details: { reason: 'password' } });
      });
      // A rolled-back event sends nothing.
      await assert.rejects(
        t.ctx.db.transaction(async (tx) => {
          await recordEvent({ clock: t.clock, webhooks: t.ctx.webhooks }, tx, {
            type: 'mfa_disabled',
            accountId,
            details: {},
          });
          throw new Error('rolled back');
        }),
      );
      await until('the feed events', () => receiver.got.filter((g) => g.data.user_id === userId).length >= 7);
      const mine = receiver.got.filter((g) => g.data.user_id === userId);
      assert.deepEqual(
        mine.map((g) => g.type),
        [
          'user.created',
          'session.created',
          'session.ended',
          'password.changed',
          'mfa.enabled',
          'user.updated',
          'user.updated',
        ],
      );
      assert.deepEqual(mine[2]?.data, { user_id: userId, session_ids: [session], reason: 'logout' });
      assert.deepEqual(mine[3]?.data, { user_id: userId, reset: true });
      assert.deepEqual(mine[5]?.data, { user_id: userId, changes: ['email'], email });
      assert.deepEqual(mine[6]?.data, { user_id: userId, changes: ['disabled'], disabled: true });
    });

    it('sends a delivery again with the same webhook-id and body when its answer was lost', async () => {
      receiver.got.length = 0;
      receiver.flaky = true;
      try {
        const r = await register(t, { email: newEmail('dup'), password: PASSWORD, cookie: false });
        assert.equal(r.statusCode, 200, r.body);
        const userId = r.json().user.id as string;
        await until(
          'both deliveries twice',
          () => receiver.got.filter((g) => g.data.user_id === userId).length === 4,
        );
        const mine = receiver.got.filter((g) => g.data.user_id === userId);
        const ids = [...new Set(mine.map((g) => g.id))];
        assert.equal(ids.length, 2, 'two events, each delivered twice');
        for (const id of ids) {
          const copies = mine
            .filter((g) => g.id === id)
            .map((g) => JSON.stringify([g.type, g.timestamp, g.data]));
          assert.equal(copies.length, 2);
          assert.equal(copies[0], copies[1], 'the same body under the same id');
        }
        // In order: the second event waited for the first to be acknowledged.
        assert.deepEqual(
          mine.map((g) => g.type),
          ['user.created', 'user.created', 'session.created', 'session.created'],
        );
      } finally {
        receiver.flaky = false;
      }
    });

    it('sends nothing for a change rolled back', async () => {
      receiver.got.length = 0;
      const before = (await queued(t)).length;
      const email = `rollback-${newEmail('x')}`;
      const r = await register(t, { email, password: PASSWORD, cookie: false });
      assert.equal(r.statusCode, 503, r.body);
      assert.equal((await queued(t)).length, before, 'no delivery row');
      // A change that commits afterwards goes out; the rolled-back one never does.
      const ok = await register(t, { email: newEmail('after'), password: PASSWORD, cookie: false });
      assert.equal(ok.statusCode, 200, ok.body);
      await until('the later sign-up', () => receiver.got.some((g) => g.data.user_id === ok.json().user.id));
      assert.ok(!JSON.stringify(receiver.got).includes(email));
    });
  });

  describe(`webhooks given up [${kind}]`, () => {
    let t: TestApp;
    const receiver = new Receiver();
    before(async () => {
      await receiver.start();
      receiver.down = true;
      t = await buildTestApp(kind, {
        ...HS,
        ...FAST,
        RATE_LIMIT_ENABLED: false,
        STORAGE_ENABLED: false,
        WEBHOOK_URL: [receiver.url],
        WEBHOOK_SECRET: SECRET,
        WEBHOOK_EVENTS: ['user.created'],
        WEBHOOK_MAX_ATTEMPTS: 2,
        METRICS_TOKEN: 'metrics-token-of-at-least-32-characters',
        HASURA_GRAPHQL_ADMIN_SECRET: 'admin-secret-of-the-webhooks-suite',
      });
    });
    after(async () => {
      await t.close();
      await receiver.stop();
    });

    it('shows a delivery given up in /metrics and gatehouse webhooks list-failed', async () => {
      const r = await register(t, { email: newEmail('failing'), password: PASSWORD, cookie: false });
      assert.equal(r.statusCode, 200, r.body);
      await until('the delivery to be given up', async () => {
        const { rows } = await t.ctx.db.query<{ n: number }>(
          'test-failed',
          `SELECT count(*)::int AS n FROM auth.email_outbox WHERE kind = 'webhook' AND failed_at IS NOT NULL`,
        );
        return Number(rows[0]?.n) === 1;
      });
      // Only user.created is chosen: the sign-in's session.created was never queued.
      assert.deepEqual(
        (await queued(t)).map((q) => q.template),
        ['user.created'],
      );
      const m = await t.app.inject({
        url: '/metrics',
        headers: { authorization: 'Bearer metrics-token-of-at-least-32-characters' },
      });
      assert.equal(m.statusCode, 200, m.body);
      assert.match(m.body, /^gatehouse_webhooks_given_up 1$/m);
      assert.match(m.body, /^gatehouse_webhook_failures_total\{outcome="given_up",type="user.created"\} 1$/m);
      let out = '';
      let err = '';
      const code = await runCli(['webhooks', 'list-failed', '--json'], {
        out: (text) => {
          out += text;
        },
        err: (text) => {
          err += text;
        },
        env: {},
        cwd: t.dataDir,
        input: () => '',
        now: () => new Date(),
        service: { config: t.config, db: t.ctx.db },
      });
      assert.equal(code, 0, err);
      const listed = JSON.parse(out);
      assert.equal(listed.length, 1);
      assert.equal(listed[0].type, 'user.created');
      assert.equal(listed[0].url, receiver.url);
      assert.equal(listed[0].attempts, 2);
      assert.match(listed[0].webhook_id, /^msg_/);
      assert.match(listed[0].last_error, /HTTP 503/);
      // The admin API (and the console's Emails page on it) shows the same, from the same store function.
      const admin = await t.app.inject({
        url: '/admin/webhooks/failed',
        headers: { 'x-hasura-admin-secret': 'admin-secret-of-the-webhooks-suite' },
      });
      assert.equal(admin.statusCode, 200, admin.body);
      assert.deepEqual(admin.json(), listed);
      const stranger = await t.app.inject({ url: '/admin/webhooks/failed' });
      assert.equal(stranger.statusCode, 401, 'no credential, no list');
    });
  });
}

describe('webhook settings', () => {
  for (const [overrides, expected] of [
    [
      { WEBHOOK_URL: ['ftp://example.com/x'], WEBHOOK_SECRET: SECRET },
      /WEBHOOK_URL entry "ftp:\/\/example.com\/x" must be an http/,
    ],
    [{ WEBHOOK_URL: ['not a url'], WEBHOOK_SECRET: SECRET }, /WEBHOOK_URL entry "not a url" must be an http/],
    [{ WEBHOOK_URL: ['https://example.com/x'] }, /WEBHOOK_SECRET must be a Standard Webhooks secret/],
    [{ WEBHOOK_EVENTS: ['user.exploded'] }, /WEBHOOK_EVENTS entry "user.exploded" is not an event type/],
  ] as [ConfigOverrides, RegExp][]) {
    it(`refuses to start with ${JSON.stringify(overrides)}`, async () => {
      await assert.rejects(buildTestApp('pglite', { ...HS, ...overrides }), (err: Error) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.ok(
          err.problems.some((p) => expected.test(p)),
          err.problems.join('\n'),
        );
        return true;
      });
    });
  }
});
