import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jwtVerify } from 'jose';
import { insertAccount } from '../../src/auth/accounts-store.ts';
import { issueSession, refreshSession } from '../../src/auth/sessions.ts';
import { consumeTicket, issueTicket, peekTicket, recordTicketFailure } from '../../src/auth/tickets-store.ts';
import { authDeps } from '../../src/context.ts';
import { HS, HS_KEY } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

for (const kind of dbKinds()) {
  describe(`auth core: tickets and sessions [${kind}]`, () => {
    let t: TestApp;
    let accountId: string;
    before(async () => {
      t = await buildTestApp(kind, HS);
      ({ accountId } = await t.ctx.db.transaction((tx) =>
        insertAccount(tx, {
          email: 'core@example.com',
          passwordHash: null,
          active: true,
          isAnonymous: false,
          defaultRole: 'user',
          roles: ['user'],
          userData: { display_name: 'Core' },
        }),
      ));
    });
    after(() => t.close());

    it('consumes a ticket once and only for its purpose', async () => {
      const now = t.clock.now();
      const { ticket } = await issueTicket(t.ctx.db, t.config, now, { accountId, purpose: 'password-reset' });
      assert.match(ticket, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(await consumeTicket(t.ctx.db, now, ticket, 'email-change'), undefined);
      const used = await consumeTicket(t.ctx.db, now, ticket, 'password-reset');
      assert.equal(used?.accountId, accountId);
      assert.equal(await consumeTicket(t.ctx.db, now, ticket, 'password-reset'), undefined);
    });

    it('stores only the digest of a ticket', async () => {
      const { ticket } = await issueTicket(t.ctx.db, t.config, t.clock.now(), {
        accountId,
        purpose: 'activation',
      });
      const { rows } = await t.ctx.db.query<{ n: number }>(
        'test',
        'SELECT count(*)::int AS n FROM auth.tickets WHERE ticket_hash = $1',
        [ticket],
      );
      assert.equal(rows[0]?.n, 0);
    });

    it('refuses a ticket after its lifetime', async () => {
      const now = t.clock.now();
      const { ticket } = await issueTicket(t.ctx.db, t.config, now, { accountId, purpose: 'mfa-login' });
      const later = new Date(now.getTime() + t.config.TICKET_MFA_EXPIRES_IN * 60_000 + 1);
      assert.equal(await consumeTicket(t.ctx.db, later, ticket, 'mfa-login'), undefined);
    });

    it('uses up a ticket after the maximum failed attempts', async () => {
      const now = t.clock.now();
      const { ticket } = await issueTicket(t.ctx.db, t.config, now, { accountId, purpose: 'mfa-login' });
      assert.equal(await recordTicketFailure(t.ctx.db, now, ticket, 'mfa-login', 2), 1);
      assert.equal((await peekTicket(t.ctx.db, now, ticket, 'mfa-login'))?.failedAttempts, 1);
      assert.equal(await recordTicketFailure(t.ctx.db, now, ticket, 'mfa-login', 2), 2);
      assert.equal(await peekTicket(t.ctx.db, now, ticket, 'mfa-login'), undefined);
    });

    it('purges spent and expired tickets older than a day when issuing a new one', async () => {
      const now = t.clock.now();
      const { ticket } = await issueTicket(t.ctx.db, t.config, now, { accountId, purpose: 'email-change' });
      await consumeTicket(t.ctx.db, now, ticket, 'email-change');
      const later = new Date(now.getTime() + 2 * 86_400_000);
      await issueTicket(t.ctx.db, t.config, later, { accountId, purpose: 'email-change' });
      const { rows } = await t.ctx.db.query<{ n: number }>(
        'test',
        `SELECT count(*)::int AS n FROM auth.tickets WHERE account_id = $1 AND purpose = 'email-change' AND created_at < $2`,
        [accountId, later],
      );
      assert.equal(rows[0]?.n, 0);
    });

    it('issues a verifiable session and rotates its refresh token', async () => {
      const s = await issueSession(authDeps(t.ctx), accountId);
      const { payload } = await jwtVerify(s.access.token, new TextEncoder().encode(HS_KEY), {
        algorithms: ['HS256'],
        currentDate: t.clock.now(),
      });
      const claims = payload['https://hasura.io/jwt/claims'] as Record<string, unknown>;
      assert.equal(claims['x-hasura-user-id'], s.user.id);
      assert.deepEqual(claims['x-hasura-allowed-roles'], ['user']);
      const next = await refreshSession(t.ctx, s.refreshToken);
      assert.notEqual(next.refreshToken, s.refreshToken);
      assert.equal(next.familyId, s.familyId);
    });
  });
}
