/**
 * Pre-registration takeover (issue 15, point 1). With AUTO_ACTIVATE_NEW_USERS=false anyone can register
 * anyone's address; the activation link then lands in the owner's inbox. Whoever has not proven the
 * mailbox must not end up holding the password, or having chosen the roles, default role or custom
 * fields, of the account the owner activates. Every attack here goes through HTTP and the real SMTP
 * capture, as an attacker and a victim would.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, type MailTestApp } from './fixtures.ts';

const pathOf = (u: URL) => u.pathname + u.search;

const ATTACKER_PASSWORD = 'attacker-chose-this';
const OWNER_PASSWORD = 'owner-chose-this';
/** What an attacker would like the owner's account to carry. */
const ATTACKER_CHOICES = {
  user_data: { display_name: 'Support Team', avatar_url: 'http://evil.example/logo.png' },
  register_options: { allowed_roles: ['user', 'editor'], default_role: 'editor' },
};

for (const kind of dbKinds()) {
  describe(`pre-registration takeover [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, {
        AUTO_ACTIVATE_NEW_USERS: false,
        MAGIC_LINK_ENABLED: true,
        LOST_PASSWORD_ENABLED: true,
        REDIRECT_URL_SUCCESS: 'http://app.test/welcome',
        REGISTRATION_CUSTOM_FIELDS: ['display_name', 'avatar_url'],
        ALLOWED_USER_ROLES: ['user', 'editor'],
      });
    });
    after(() => t.close());

    let n = 0;
    const victimAddress = () => `victim-${++n}@example.com`;

    const register = async (payload: Record<string, unknown>) => {
      const res = await t.app.inject({ method: 'POST', url: '/auth/register', payload });
      assert.equal(res.statusCode, 200, res.body);
      return res;
    };
    const resend = async (email: string) => {
      const res = await t.app.inject({ method: 'POST', url: '/auth/activate/resend', payload: { email } });
      assert.equal(res.statusCode, 204);
      await t.ctx.tasks.idle();
    };
    const login = (email: string, password: string) =>
      t.app.inject({ method: 'POST', url: '/auth/login', payload: { email, password, cookie: false } });
    /** Every registration link in the inbox, oldest first. */
    const inboxLinks = (email: string) =>
      t.smtp
        .to(email)
        .map((m) =>
          findLink(m.text, m.text.includes('/auth/magic-link') ? '/auth/magic-link' : '/auth/activate'),
        );

    /** Follows an emailed link as the owner's browser would; returns the session it opened. */
    async function follow(link: URL) {
      const res = await t.app.inject({ method: 'GET', url: `${pathOf(link)}&cookie=false` });
      assert.equal(res.statusCode, 302, res.body);
      const refresh = new URL(res.headers.location as string).searchParams.get('refresh_token');
      assert.ok(refresh, 'the activation still redirects with a refresh token');
      const s = await t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refresh}` });
      assert.equal(s.statusCode, 200, s.body);
      const body = s.json();
      const claims = JSON.parse(Buffer.from(body.jwt_token.split('.')[1], 'base64url').toString())[
        'https://hasura.io/jwt/claims'
      ];
      return { user: body.user, claims };
    }

    /** The owner sets a password through the lost-password flow. */
    async function resetPassword(email: string, password: string) {
      const req = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/request',
        payload: { email },
      });
      assert.equal(req.statusCode, 204);
      await t.ctx.tasks.idle();
      const ticket = t.smtp.last(email).headers.get('x-ticket');
      const res = await t.app.inject({
        method: 'POST',
        url: '/auth/change-password/change',
        payload: { ticket, new_password: password },
      });
      assert.equal(res.statusCode, 204, res.body);
    }

    /** Nothing the attacker chose is on the account; their password does not open it. */
    async function assertNothingOfTheAttacker(email: string, session: Awaited<ReturnType<typeof follow>>) {
      assert.equal(session.user.display_name, email, 'display name back to the default (the email)');
      assert.equal(session.user.avatar_url, undefined, 'custom field back to its default');
      assert.equal(session.claims['x-hasura-default-role'], 'user');
      assert.deepEqual(session.claims['x-hasura-allowed-roles'], ['user']);
      const attacker = await login(email, ATTACKER_PASSWORD);
      assert.equal(attacker.statusCode, 401, "the attacker's password does not open the account");
    }

    for (const which of ['the attacker’s (first)', 'the owner’s own (second)'] as const) {
      it(`an attacker's pre-registration does not leave their password, roles or custom fields on the account the owner activates (owner follows ${which} link)`, async () => {
        const email = victimAddress();
        await register({ email, password: ATTACKER_PASSWORD, ...ATTACKER_CHOICES });
        await register({ email, password: OWNER_PASSWORD });
        const links = inboxLinks(email);
        assert.equal(links.length, 2, 'both requests mailed the owner a link');
        const [first, second] = links as [URL, URL];
        const chosen = which.includes('first') ? first : second;
        const other = chosen === first ? second : first;

        const session = await follow(chosen);
        await assertNothingOfTheAttacker(email, session);
        // The owner cannot tell the two links apart, so neither password is kept: the owner sets one.
        assert.equal((await login(email, OWNER_PASSWORD)).statusCode, 401);
        assert.equal(
          (await t.app.inject({ method: 'GET', url: pathOf(other) })).statusCode,
          401,
          'the other link stopped working',
        );
        await resetPassword(email, 'owner-new-password');
        assert.equal((await login(email, 'owner-new-password')).statusCode, 200);
        assert.equal((await login(email, ATTACKER_PASSWORD)).statusCode, 401);
      });
    }

    it("an attacker's pre-registration does not survive an activation through /auth/activate/resend", async () => {
      const email = victimAddress();
      await register({ email, password: ATTACKER_PASSWORD, ...ATTACKER_CHOICES });
      const [attackerLink] = inboxLinks(email) as [URL];
      await resend(email);
      const links = inboxLinks(email);
      assert.equal(links.length, 2);
      assert.match(t.smtp.last(email).text, /more than one request/, 'the resent link says it keeps nothing');
      const session = await follow(links[1] as URL);
      await assertNothingOfTheAttacker(email, session);
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(attackerLink) })).statusCode, 401);
      await resetPassword(email, 'owner-new-password');
      assert.equal((await login(email, 'owner-new-password')).statusCode, 200);
    });

    it('a registration made after a resend keeps nothing either, even as the newest link', async () => {
      const email = victimAddress();
      await register({ email, password: 'attacker-first-try', ...ATTACKER_CHOICES });
      await resend(email);
      // The attacker registers again, so that the newest email in the owner's inbox is theirs.
      await register({ email, password: ATTACKER_PASSWORD, ...ATTACKER_CHOICES });
      const links = inboxLinks(email);
      assert.equal(links.length, 3);
      const session = await follow(links[2] as URL);
      await assertNothingOfTheAttacker(email, session);
      assert.equal((await login(email, 'attacker-first-try')).statusCode, 401);
    });

    it("an attacker's password-less pre-registration does not leave roles or custom fields (magic link, and via resend)", async () => {
      // The owner registers with a password after the attacker's magic-link registration, then follows
      // the attacker's magic register link.
      const email = victimAddress();
      await register({ email, ...ATTACKER_CHOICES });
      await register({ email, password: OWNER_PASSWORD });
      const [magic, activation] = inboxLinks(email) as [URL, URL];
      assert.equal(magic.searchParams.get('action'), 'register');
      const session = await follow(magic);
      await assertNothingOfTheAttacker(email, session);
      assert.equal((await login(email, OWNER_PASSWORD)).statusCode, 401, 'no password kept either');
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(activation) })).statusCode, 401);

      // Through a resend (twice): the fresh link is still a magic register link, and it keeps nothing.
      const other = victimAddress();
      await register({ email: other, ...ATTACKER_CHOICES });
      await resend(other);
      await resend(other);
      const fresh = inboxLinks(other)[2] as URL;
      assert.match(fresh.pathname, /\/auth\/magic-link$/);
      await assertNothingOfTheAttacker(other, await follow(fresh));
    });

    it('a single registration keeps its own password, roles and custom fields', async () => {
      const email = victimAddress();
      await register({ email, password: OWNER_PASSWORD, ...ATTACKER_CHOICES });
      const mail = t.smtp.last(email);
      assert.doesNotMatch(mail.text, /more than one request/);
      const session = await follow(inboxLinks(email)[0] as URL);
      assert.equal(session.user.display_name, 'Support Team');
      assert.equal(session.user.avatar_url, 'http://evil.example/logo.png');
      assert.equal(session.claims['x-hasura-default-role'], 'editor');
      assert.deepEqual(session.claims['x-hasura-allowed-roles'], ['user', 'editor']);
      assert.equal((await login(email, OWNER_PASSWORD)).statusCode, 200);
    });

    it('a second registration tells the owner, in its email, that no password will be kept', async () => {
      const email = victimAddress();
      await register({ email, password: ATTACKER_PASSWORD });
      await register({ email, password: OWNER_PASSWORD });
      const second = t.smtp.last(email);
      assert.match(second.text, /more than one request \(to register, or to send this link again\)/);
      assert.match(second.text, /Forgot password\?/);
    });

    it('a pre-registration whose link expired does not stand in the way of a later registration', async () => {
      const email = victimAddress();
      await register({ email, password: ATTACKER_PASSWORD, ...ATTACKER_CHOICES });
      const [attackerLink] = inboxLinks(email) as [URL];
      t.clock.advance(t.config.TICKET_ACTIVATION_EXPIRES_IN * 60_000 + 60_000);
      await register({ email, password: OWNER_PASSWORD });
      const ownLink = inboxLinks(email)[1] as URL;
      assert.equal((await t.app.inject({ method: 'GET', url: pathOf(attackerLink) })).statusCode, 401);
      const session = await follow(ownLink);
      assert.equal(session.user.display_name, email);
      assert.equal(session.claims['x-hasura-default-role'], 'user');
      assert.equal(
        (await login(email, OWNER_PASSWORD)).statusCode,
        200,
        'the only live request keeps its password',
      );
      assert.equal((await login(email, ATTACKER_PASSWORD)).statusCode, 401);
    });

    it('a pending account answers ACCOUNT_NOT_ACTIVATED only to the latest registration’s password', async () => {
      const email = victimAddress();
      await register({ email, password: ATTACKER_PASSWORD, ...ATTACKER_CHOICES });
      const right = await login(email, ATTACKER_PASSWORD);
      assert.equal(right.statusCode, 400);
      assert.equal(right.json().code, 'ACCOUNT_NOT_ACTIVATED');
      const wrong = await login(email, 'not the password');
      assert.equal(wrong.statusCode, 401);
      assert.equal(wrong.json().code, 'INVALID_CREDENTIALS');
      const { rows } = await t.ctx.db.query<{ password_hash: string | null; default_role: string }>(
        'TestPendingRow',
        'SELECT password_hash, default_role FROM auth.accounts WHERE email = $1',
        [email],
      );
      assert.deepEqual(
        rows[0],
        { password_hash: null, default_role: 'user' },
        'nothing chosen on the pending row',
      );
    });
  });
}
