/**
 * The outbox sender's leases, in process (the real service process is in
 * test/reliability/stop-outbox.test.ts): a lease is short and renewed while its delivery runs, and a
 * stopping sender releases at once the email whose delivery has not handed anything to SMTP.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { dbKinds } from '../helpers/db.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { buildMailApp, type MailTestApp } from './fixtures.ts';

interface LeaseRow {
  claimed_by: string | null;
  held_for_ms: number | null;
  attempts: number;
  due: boolean;
  sent: boolean;
}

for (const kind of dbKinds()) {
  describe(`outbox leases [${kind}]`, () => {
    let t: MailTestApp;
    let proxy: TcpProxy;
    before(async () => {
      // An SMTP host that accepts connections and never greets (blackholed: the target is never used).
      proxy = await startTcpProxy({ host: '127.0.0.1', port: 9 });
      proxy.mode = 'blackhole';
      t = await buildMailApp(
        kind,
        {
          AUTO_ACTIVATE_NEW_USERS: false,
          EMAIL_CLAIM_TIMEOUT_MS: 1000,
          SMTP_TIMEOUT_MS: 30_000,
          SMTP_PORT: proxy.port,
        },
        { waitForEmails: false },
      );
    });
    after(async () => {
      await t.close();
      await proxy.close();
    });

    const row = async (email: string): Promise<LeaseRow | undefined> =>
      (
        await t.ctx.db.query<LeaseRow>(
          'TestLeaseRow',
          `SELECT claimed_by, attempts, next_attempt_at <= now() AS due, sent_at IS NOT NULL AS sent,
                  (extract(epoch FROM claimed_until - now()) * 1000)::int AS held_for_ms
             FROM auth.email_outbox WHERE recipient = $1`,
          [email],
        )
      ).rows[0];

    it('a delivery stuck at a silent SMTP server keeps its short lease alive, then a stop releases it at once, still due', async () => {
      const email = 'stuck@example.com';
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/register',
        payload: { email, password: 'a password long enough' },
      });
      assert.equal(res.statusCode, 200);
      const accepted = proxy.accepted;
      for (let i = 0; i < 200 && proxy.accepted === accepted; i++) await sleep(20);
      assert.ok(proxy.accepted > accepted, 'the delivery reached the silent server');

      // Three leases long: without renewals the lease would have run out twice over.
      await sleep(3000);
      const held = await row(email);
      assert.equal(held?.claimed_by, t.ctx.outbox.senderId);
      assert.ok((held?.held_for_ms ?? 0) > 0, `the lease is alive (${held?.held_for_ms} ms left)`);
      assert.ok((held?.held_for_ms ?? Infinity) <= 1000, 'and short');

      const stoppedAt = Date.now();
      t.ctx.outbox.stop();
      await t.ctx.tasks.idle();
      assert.ok(Date.now() - stoppedAt < 2000, 'the stop did not wait for the silent server');
      const released = await row(email);
      assert.equal(released?.claimed_by, null, 'released');
      assert.equal(released?.held_for_ms, null);
      assert.equal(released?.attempts, 0, 'the aborted attempt is not counted');
      assert.equal(released?.due, true, 'due at once for the next start or another instance');
      assert.equal(released?.sent, false);
    });
  });
}
