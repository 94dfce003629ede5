/**
 * Registration must not tell whether an address has an account (issue 15, point 6): with
 * AUTO_ACTIVATE_NEW_USERS=false a new, a pending and an active address get the same answer, in status,
 * body and time; only the mailbox learns which it was.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { configuredKind, observeHashes } from '../../src/auth/passwords.ts';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, createAccount, deliverQueuedNow, type MailTestApp } from './fixtures.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

for (const kind of dbKinds()) {
  describe(`registration answers the same for every address [${kind}]`, () => {
    let t: MailTestApp;
    let n = 0;
    before(async () => {
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        LOST_PASSWORD_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/welcome',
        REGISTRATION_CUSTOM_FIELDS: ['display_name'],
      });
    });
    after(() => t.close());

    const register = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/auth/register', payload });
    const userIdOf = async (email: string) =>
      (
        await t.ctx.db.query<{ user_id: string }>(
          'TestUserId',
          'SELECT user_id FROM auth.accounts WHERE email = $1',
          [email],
        )
      ).rows[0]?.user_id;

    /** A new, a pending and an active address, the last two with their real user ids. */
    async function threeAddresses() {
      n += 1;
      const fresh = `new-${n}@example.com`;
      const pending = `pending-${n}@example.com`;
      const active = `active-${n}@example.com`;
      assert.equal((await register({ email: pending, password: 'first-request' })).statusCode, 200);
      await createAccount(t, { email: active, password: 'owner-password', displayName: 'Owner' });
      t.smtp.clear();
      return { fresh, pending, active };
    }

    it('registration answers the same for a new, a pending and an active address; the mailbox learns the truth', async () => {
      const { fresh, pending, active } = await threeAddresses();
      const real = { [pending]: await userIdOf(pending), [active]: await userIdOf(active) };
      const answers = [];
      for (const email of [fresh, pending, active]) {
        const res = await register({ email, password: 'same-password', user_data: { display_name: 'Sam' } });
        answers.push(res);
        assert.equal(res.statusCode, 200, `${email}: ${res.body}`);
        assert.equal(res.headers['set-cookie'], undefined);
        const body = res.json();
        assert.deepEqual(Object.keys(body), ['user']);
        assert.deepEqual(Object.keys(body.user).sort(), ['display_name', 'email', 'id']);
        assert.equal(body.user.email, email);
        assert.equal(body.user.display_name, 'Sam');
        assert.match(body.user.id, UUID);
        if (real[email])
          assert.notEqual(body.user.id, real[email], 'the id of a taken address is not its account’s');
      }
      // The headers say nothing either (same set, same content type).
      const headerNames = answers.map((r) =>
        Object.keys(r.headers)
          .filter((h) => !['date', 'content-length', 'x-request-id'].includes(h))
          .sort()
          .join(),
      );
      assert.equal(new Set(headerNames).size, 1, headerNames.join(' | '));

      const freshMail = t.smtp.last(fresh);
      assert.equal(freshMail.subject, 'Confirm your email address');
      const pendingMail = t.smtp.last(pending);
      assert.equal(pendingMail.subject, 'Confirm your email address');
      const activeMail = t.smtp.last(active);
      assert.equal(activeMail.subject, 'You already have an account');
      assert.match(activeMail.text, /Hello Owner,/);
      assert.match(activeMail.text, /if you forgot it, ask for a new one/);
      assert.equal(findLink(activeMail.text, 'app.test').href, 'http://app.test/welcome');
      assert.equal(activeMail.headers.get('x-ticket'), undefined, 'no ticket in the notice');
      assert.equal(t.smtp.to(active).length, 1);

      // The active account did not change: its password still works, the request's did not replace it.
      const login = (password: string) =>
        t.app.inject({ method: 'POST', url: '/auth/login', payload: { email: active, password } });
      const owner = await login('owner-password');
      assert.equal(owner.statusCode, 200, owner.body);
      assert.equal(owner.json().user.display_name, 'Owner');
      assert.equal((await login('same-password')).statusCode, 401);
    });

    it('registration hashes the password of a taken address too, so it takes as long as for a new one', async () => {
      // Counted, not timed: the hash is the one costly step, and a wall clock on a loaded machine says
      // nothing. A new, a pending and an active address each cost exactly one hash of the configured kind.
      const { fresh, pending, active } = await threeAddresses();
      for (const email of [fresh, pending, active]) {
        const kinds: string[] = [];
        const stop = observeHashes((kind) => kinds.push(kind));
        try {
          const res = await register({ email, password: 'same-password' });
          assert.equal(res.statusCode, 200, res.body);
        } finally {
          stop();
        }
        assert.deepEqual(kinds, [configuredKind(t.config)], email);
      }
    });

    it('registration answers the same for every address while the email cannot be sent; each mailbox gets its email once it can', async () => {
      const { fresh, pending, active } = await threeAddresses();
      const before = new Map([fresh, pending, active].map((e) => [e, t.smtp.to(e).length]));
      t.smtp.refuse = true;
      try {
        const answers = [];
        for (const email of [fresh, pending, active]) {
          const res = await register({ email, password: 'same-password' });
          assert.equal(res.statusCode, 200, email);
          answers.push(Object.keys(res.json()).sort().join());
        }
        assert.equal(new Set(answers).size, 1, 'the same shape of answer');
      } finally {
        t.smtp.refuse = false;
      }
      assert.ok(await userIdOf(fresh), 'the new address has its account');
      for (const e of [fresh, pending, active]) assert.equal(t.smtp.to(e).length, before.get(e), e);
      await deliverQueuedNow(t);
      for (const e of [fresh, pending, active])
        assert.equal(t.smtp.to(e).length, (before.get(e) ?? 0) + 1, `${e} got its email once`);
      assert.equal(t.smtp.last(active).subject, 'You already have an account');
    });

    it('two registrations of a new address at once both get the answer of a new address', async () => {
      const email = `racing-${++n}@example.com`;
      const [a, b] = await Promise.all([
        register({ email, password: 'first-racer' }),
        register({ email, password: 'second-racer' }),
      ]);
      assert.deepEqual([a.statusCode, b.statusCode], [200, 200], `${a.body} ${b.body}`);
      const { rows } = await t.ctx.db.query<{ accounts: number; attempts: number }>(
        'TestRace',
        `SELECT count(DISTINCT a.id)::int AS accounts, count(r.id)::int AS attempts
           FROM auth.accounts a LEFT JOIN auth.registration_attempts r ON r.account_id = a.id
          WHERE a.email = $1`,
        [email],
      );
      assert.deepEqual(rows[0], { accounts: 1, attempts: 2 });
      assert.equal(t.smtp.to(email).length, 2);
    });

    it('refusals that depend on the request alone are the same for every address', async () => {
      const { fresh, pending, active } = await threeAddresses();
      for (const email of [fresh, pending, active]) {
        const res = await register({
          email,
          password: 'same-password',
          register_options: { allowed_roles: ['admin'], default_role: 'admin' },
        });
        assert.equal(res.statusCode, 400, email);
        assert.equal(res.json().code, 'ROLES_NOT_ALLOWED');
      }
      assert.equal(t.smtp.messages.length, 0, 'a refused request sends nothing');
    });
  });

  describe(`registration without emails answers the same too [${kind}]`, () => {
    it('answers the same for a new, a pending and an active address when EMAILS_ENABLED is false', async () => {
      const t = await buildMailApp(kind, { AUTO_ACTIVATE_NEW_USERS: false, EMAILS_ENABLED: false });
      try {
        await createAccount(t, { email: 'active@example.com', password: 'owner-password' });
        const reg = (email: string) =>
          t.app.inject({ method: 'POST', url: '/auth/register', payload: { email, password: 'pw-12345' } });
        assert.equal((await reg('pending@example.com')).statusCode, 200);
        for (const email of ['new@example.com', 'pending@example.com', 'active@example.com']) {
          const res = await reg(email);
          assert.equal(res.statusCode, 200, email);
          assert.deepEqual(Object.keys(res.json()), ['user']);
        }
        assert.equal(t.smtp.messages.length, 0);
      } finally {
        await t.close();
      }
    });
  });
}
