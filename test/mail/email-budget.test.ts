/**
 * Email bombing (issue 25, point 6): every email the service sends to one address counts against one
 * budget, whatever the route that asks for it (RATE_LIMIT_EMAIL_ADDRESS_MAX per window, and a daily cap).
 * Over it, the route answers exactly as it would have and no email is queued.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MemoryStore } from '../../src/http/counters.ts';
import { addressBudget } from '../../src/mail/budget.ts';
import { dbKinds } from '../helpers/db.ts';
import { buildMailApp, createAccount, type MailTestApp } from './fixtures.ts';

const silent = (await import('pino')).default({ level: 'silent' });

for (const kind of dbKinds()) {
  describe(`one email budget per address, whatever the route [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        LOST_PASSWORD_ENABLED: true,
        MAGIC_LINK_ENABLED: true,
        // The limits (and with them the budget) at their defaults: 5 emails per address per 15 minutes.
        RATE_LIMIT_ENABLED: true,
      });
    });
    after(() => t.close());

    const post = (url: string, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url, payload });

    it("an attacker who registers a victim's active address 40 times sends the victim at most the budget's emails", async () => {
      const victim = 'bombed@example.com';
      await createAccount(t, { email: victim, password: 'the owner password' });
      const answers = [];
      for (let i = 0; i < 40; i++) {
        const res = await post('/auth/register', { email: victim, password: `attacker password ${i}` });
        answers.push({ status: res.statusCode, keys: Object.keys(res.json()).sort().join(',') });
      }
      // The default budget: 5 emails per address per 15 minutes.
      assert.ok(t.smtp.to(victim).length <= 5, `${t.smtp.to(victim).length} emails reached the victim`);
      assert.equal(t.smtp.to(victim).length, 5, 'the first ones, within the budget, were sent');
      assert.equal(t.config.RATE_LIMIT_EMAIL_ADDRESS_MAX, 5);
      // Accepted registrations over the budget answer exactly like those within it; the per-address
      // registration limit (RATE_LIMIT_REGISTER_EMAIL_MAX, 25) answers the rest with 429, as before.
      const first = answers[0];
      assert.deepEqual(
        answers.slice(0, t.config.RATE_LIMIT_REGISTER_EMAIL_MAX),
        Array(t.config.RATE_LIMIT_REGISTER_EMAIL_MAX).fill(first),
      );
      assert.equal(first?.status, 200);
      assert.ok(answers.slice(t.config.RATE_LIMIT_REGISTER_EMAIL_MAX).every((a) => a.status === 429));

      // Someone else's address has a budget of its own.
      const other = 'bystander@example.com';
      assert.equal(
        (await post('/auth/register', { email: other, password: 'a password of mine' })).statusCode,
        200,
      );
      assert.equal(t.smtp.to(other).length, 1);
    });

    it('registration, lost password, magic link and resend share one budget per address; it comes back after its window', async () => {
      const victim = 'shared-budget@example.com';
      await createAccount(t, { email: victim, password: 'the owner password' });
      for (let i = 0; i < 3; i++)
        assert.equal(
          (await post('/auth/register', { email: victim, password: `x password ${i}` })).statusCode,
          200,
        );
      assert.equal((await post('/auth/change-password/request', { email: victim })).statusCode, 204);
      const magic = await post('/auth/login', { email: victim });
      assert.deepEqual(magic.json(), { magicLink: true });
      assert.equal(t.smtp.to(victim).length, 5, 'three notices, a reset link and a magic link');

      // Over the budget: the same answers, no email.
      assert.equal((await post('/auth/change-password/request', { email: victim })).statusCode, 204);
      const again = await post('/auth/login', { email: victim });
      assert.equal(again.statusCode, 200);
      assert.deepEqual(again.json(), { magicLink: true });
      assert.equal(
        (await post('/auth/register', { email: victim, password: 'x password 9' })).statusCode,
        200,
      );
      assert.equal(t.smtp.to(victim).length, 5, 'nothing more reached the victim');

      // A pending account's activation resends count against the same kind of budget.
      const pending = 'pending-budget@example.com';
      assert.equal(
        (await post('/auth/register', { email: pending, password: 'my own password' })).statusCode,
        200,
      );
      for (let i = 0; i < 5; i++)
        assert.equal((await post('/auth/activate/resend', { email: pending })).statusCode, 204);
      assert.equal(t.smtp.to(pending).length, 5, 'the activation email and four resends');

      // A person's normal use comes back with the window.
      t.clock.advance(t.config.RATE_LIMIT_EMAIL_ADDRESS_WINDOW + 1);
      assert.equal((await post('/auth/change-password/request', { email: victim })).statusCode, 204);
      assert.equal(t.smtp.to(victim).length, 6);
    });
  });
}

describe('the email budget', () => {
  const config = {
    RATE_LIMIT_EMAIL_ADDRESS_MAX: 3,
    RATE_LIMIT_EMAIL_ADDRESS_WINDOW: 60_000,
    RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX: 5,
  };

  it('caps each window and each day, per address, address case aside', async () => {
    let now = 0;
    const store = new MemoryStore(() => now);
    const budget = addressBudget(store, config, silent);
    const allowed = async (address: string, n: number) => {
      const out = [];
      for (let i = 0; i < n; i++) out.push(await budget.allow(address, 'notify'));
      return out.filter(Boolean).length;
    };
    assert.equal(await allowed('a@example.com', 4), 3);
    assert.equal(await allowed('A@Example.com', 1), 0, 'the same address in other letters');
    assert.equal(await allowed('b@example.com', 1), 1, 'another address');
    now += 60_001;
    assert.equal(await allowed('a@example.com', 3), 2, 'the daily cap: 5 a day, refusals not counted');
    now += 24 * 60 * 60_000;
    assert.equal(await allowed('a@example.com', 3), 3, 'a new day');
    await store.close();
  });

  it('lets the email go out when the counters cannot be reached', async () => {
    const budget = addressBudget(
      {
        increment: async () => {
          throw new Error('redis down');
        },
      },
      config,
      silent,
    );
    assert.equal(await budget.allow('a@example.com', 'notify'), true);
  });
});
