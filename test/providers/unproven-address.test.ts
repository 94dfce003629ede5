/**
 * Provider sign-in and addresses nobody proved (issue 25, point 1). An account's address may have been
 * typed in by anyone: a registration with AUTO_ACTIVATE_NEW_USERS=true (the default), or a direct email
 * change with VERIFY_EMAILS=false (the default). A provider that vouches for the address must not sign
 * its real owner in to that account, where whoever typed the address still signs in with their password
 * and reads what the owner puts there. Every attack here runs over HTTP, with the real OpenID Provider
 * from npm and a real SMTP server; the owner's legitimate ways to link are checked too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { snapshot } from '../auth/helpers.ts';
import { newEmail } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { dbKinds } from '../helpers/db.ts';
import { type OidcPeer, startOidcPeer } from '../helpers/oidc-peer.ts';
import { buildMailApp, type MailTestApp } from '../mail/fixtures.ts';
import { authenticatorCode } from '../mfa/helpers.ts';
import {
  accountCount,
  assertFailed,
  callback,
  FAILURE,
  linksOf,
  refreshTokenOf,
  SERVICE,
  SUCCESS,
  sessionOf,
} from './helpers.ts';

const CLIENT = { client_id: 'gatehouse', client_secret: 'peer-client-secret-0123456789' };
const START = `${SERVICE}/auth/providers/oidc`;
const ATTACKER_PASSWORD = 'attacker-chose-this-one';

for (const kind of dbKinds()) {
  describe(`provider sign-in and unproven addresses [${kind}]`, () => {
    let peer: OidcPeer;
    /** Default settings: AUTO_ACTIVATE_NEW_USERS=true, VERIFY_EMAILS=false. */
    let t: MailTestApp;
    let n = 0;
    /** The victim at the provider, which vouches for their address. */
    const victimAt = (email: string) => ({
      sub: `victim-${++n}-${Date.now()}`,
      email,
      email_verified: true,
      name: 'Victim',
    });
    const oidc = {
      OIDC_ENABLED: true,
      OIDC_CLIENT_ID: CLIENT.client_id,
      OIDC_CLIENT_SECRET: CLIENT.client_secret,
      REDIRECT_URL_SUCCESS: SUCCESS,
      PROVIDER_FAILURE_REDIRECT: FAILURE,
      LOST_PASSWORD_ENABLED: true,
      MAGIC_LINK_ENABLED: true,
      SENSITIVE_ACTION_WINDOW: 300,
    } as const;

    before(async () => {
      peer = await startOidcPeer({ clients: [{ ...CLIENT, redirect_uris: [callback('oidc')] }] });
      t = await buildMailApp(kind, { ...oidc, OIDC_ISSUER: peer.issuer });
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    const post = (app: MailTestApp, url: string, payload: Record<string, unknown>, jwt?: string) =>
      app.app.inject({
        method: 'POST',
        url,
        payload,
        headers: jwt ? { authorization: `Bearer ${jwt}` } : {},
      });
    const passwordLogin = (app: MailTestApp, email: string, password: string) =>
      post(app, '/auth/login', { email, password, cookie: false });
    /** Registers an active account (AUTO_ACTIVATE_NEW_USERS=true) and returns its session. */
    const registerActive = async (app: MailTestApp, email: string, password = ATTACKER_PASSWORD) => {
      const res = await post(app, '/auth/register', { email, password, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.ok(body.jwt_token, 'auto-activation answers with tokens');
      return { userId: body.user.id as string, jwt: body.jwt_token as string };
    };

    it('an attacker who pre-registers the victim\u2019s address cannot receive the victim\u2019s provider sign-in', async () => {
      const victim = newEmail('victim');
      const attacker = await registerActive(t, victim);
      peer.signInAs(victimAt(victim));
      const before = await snapshot(t);
      const accounts = await accountCount(t);
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_EMAIL_IN_USE');
      assert.deepEqual(await linksOf(t, attacker.userId), [], 'nothing linked to the attacker');
      assert.equal(await accountCount(t), accounts, 'no account created');
      assert.equal(await snapshot(t), before, 'a refused sign-in changes nothing');
    });

    it('an attacker who moves their own account to the victim\u2019s address without confirming it (VERIFY_EMAILS=false) cannot receive the victim\u2019s provider sign-in', async () => {
      const attacker = await registerActive(t, newEmail('attacker'));
      const victim = newEmail('victim');
      const moved = await post(t, '/auth/change-email', { new_email: victim }, attacker.jwt);
      assert.equal(moved.statusCode, 204, moved.body);
      assert.equal((await passwordLogin(t, victim, ATTACKER_PASSWORD)).statusCode, 200, 'the move took');
      peer.signInAs(victimAt(victim));
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_EMAIL_IN_USE');
      assert.deepEqual(await linksOf(t, attacker.userId), []);
    });

    it('an address proven and then changed by a direct UPDATE (an application through Hasura) is not proven any more', async () => {
      const owner = newEmail('owner');
      const { userId } = await registerActive(t, owner);
      await proveByPasswordReset(owner);
      const victim = newEmail('victim');
      await t.ctx.db.query('test-move', 'UPDATE auth.accounts SET email = $2 WHERE user_id = $1', [
        userId,
        victim,
      ]);
      peer.signInAs(victimAt(victim));
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_EMAIL_IN_USE');
      assert.deepEqual(await linksOf(t, userId), []);
    });

    /** Proves `email`'s mailbox the way its owner would: a reset link from the inbox, followed. */
    async function proveByPasswordReset(email: string, app = t): Promise<string> {
      const asked = await post(app, '/auth/change-password/request', { email });
      assert.equal(asked.statusCode, 204);
      await app.ctx.tasks.idle();
      const ticket = app.smtp.last(email).headers.get('x-ticket') as string;
      const done = await post(app, '/auth/change-password/change', {
        ticket,
        new_password: 'owner-chose-this-one',
      });
      assert.equal(done.statusCode, 204, done.body);
      return 'owner-chose-this-one';
    }

    it('the owner who proves the address with a password reset can then sign in with the provider', async () => {
      const owner = newEmail('owner');
      const { userId } = await registerActive(t, owner);
      peer.signInAs(victimAt(owner));
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_EMAIL_IN_USE');
      await proveByPasswordReset(owner);
      const p = victimAt(owner);
      peer.signInAs(p);
      const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(s.user.id, userId);
      assert.deepEqual(
        (await linksOf(t, userId)).map((l) => l.auth_provider_unique_id),
        [`${peer.issuer}#${p.sub}`],
      );
    });

    it('the owner who proves the address with a magic link can then sign in with the provider', async () => {
      const owner = newEmail('owner');
      const { userId } = await registerActive(t, owner);
      const asked = await post(t, '/auth/login', { email: owner });
      assert.equal(asked.statusCode, 200, asked.body);
      await t.ctx.tasks.idle();
      const token = t.smtp.last(owner).headers.get('x-token') as string;
      const followed = await t.app.inject({
        method: 'GET',
        url: `/auth/magic-link?action=log-in&token=${token}`,
      });
      assert.equal(followed.statusCode, 302, followed.body);
      peer.signInAs(victimAt(owner));
      const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(s.user.id, userId);
    });

    /** Follows the newest magic link mailed to `email`: the redirect that carries the session. */
    async function followMagicLink(email: string) {
      const asked = await post(t, '/auth/login', { email });
      assert.equal(asked.statusCode, 200, asked.body);
      await t.ctx.tasks.idle();
      const token = t.smtp.last(email).headers.get('x-token') as string;
      const followed = await t.app.inject({
        method: 'GET',
        url: `/auth/magic-link?action=log-in&token=${token}`,
      });
      assert.equal(followed.statusCode, 302, followed.body);
      return followed;
    }

    /** The attacker's own identity at the provider (another address, which it vouches for). */
    const attackerAt = () => ({
      sub: `attacker-${++n}-${Date.now()}`,
      email: newEmail('attacker-own'),
      email_verified: true,
      name: 'Attacker',
    });

    it('an attacker who pre-registers the victim\u2019s address and links their own provider identity loses that way in when the victim proves the mailbox with a password reset', async () => {
      const victim = newEmail('victim');
      const attacker = await registerActive(t, victim);
      const login = await passwordLogin(t, victim, ATTACKER_PASSWORD);
      const attackerRefresh = login.json().refresh_token as string;
      const own = attackerAt();
      peer.signInAs(own);
      const linked = await new Browser(t.app, SERVICE).go(START, {
        headers: { authorization: `Bearer ${attacker.jwt}` },
      });
      assert.equal((await sessionOf(t, refreshTokenOf(linked))).user.id, attacker.userId, 'linked');
      assert.equal((await linksOf(t, attacker.userId)).length, 1);

      const newPassword = await proveByPasswordReset(victim);

      assert.deepEqual(await linksOf(t, attacker.userId), [], 'the link made before the proof is gone');
      peer.signInAs(own);
      const back = await new Browser(t.app, SERVICE).go(START);
      const theirs = await sessionOf(t, refreshTokenOf(back));
      assert.notEqual(
        theirs.user.id,
        attacker.userId,
        'the attacker\u2019s identity no longer reaches the account',
      );
      const old = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${attackerRefresh}`,
      });
      assert.equal(old.statusCode, 401, 'the attacker\u2019s session ended');
      assert.equal((await passwordLogin(t, victim, newPassword)).statusCode, 200, 'the owner signs in');
    });

    it('an attacker who pre-registers the victim\u2019s address loses its password, sessions and provider link when the victim signs in by magic link', async () => {
      const victim = newEmail('victim');
      const attacker = await registerActive(t, victim);
      const login = await passwordLogin(t, victim, ATTACKER_PASSWORD);
      const attackerRefresh = login.json().refresh_token as string;
      const attackerJwt = login.json().jwt_token as string;
      peer.signInAs(attackerAt());
      await new Browser(t.app, SERVICE).go(START, { headers: { authorization: `Bearer ${attacker.jwt}` } });
      assert.equal((await linksOf(t, attacker.userId)).length, 1);

      const followed = await followMagicLink(victim);
      assert.match(String(followed.headers.location), /refresh_token=/, 'the owner is signed in');

      assert.equal(
        (await passwordLogin(t, victim, ATTACKER_PASSWORD)).statusCode,
        401,
        'the password is gone',
      );
      assert.deepEqual(await linksOf(t, attacker.userId), []);
      const old = await t.app.inject({
        method: 'GET',
        url: `/auth/token/refresh?refresh_token=${attackerRefresh}`,
      });
      assert.equal(old.statusCode, 401, 'the attacker\u2019s session ended');
      const reading = await t.app.inject({
        method: 'GET',
        url: '/auth/sessions',
        headers: { authorization: `Bearer ${attackerJwt}` },
      });
      assert.equal(reading.statusCode, 401, 'and its access token at once');
      // The owner's security feed says what went, and why.
      const { rows } = await t.ctx.db.query<{ type: string; details: unknown }>(
        'test-feed',
        `SELECT e.type, e.details FROM auth.security_events e JOIN auth.accounts a ON a.id = e.account_id
          WHERE a.user_id = $1 AND e.type IN ('provider_unlinked', 'session_ended')`,
        [attacker.userId],
      );
      const details = (r: { details: unknown }) =>
        (typeof r.details === 'string' ? JSON.parse(r.details) : r.details) as Record<string, unknown>;
      assert.equal(rows.filter((r) => r.type === 'provider_unlinked').length, 1);
      const ended = rows.filter((r) => r.type === 'session_ended').map(details);
      assert.deepEqual(
        ended.map((d) => d.reason),
        ['address_proven'],
      );
    });

    it('an address proven once keeps its password and provider link through later resets and magic links', async () => {
      const owner = newEmail('owner');
      const me = await registerActive(t, owner);
      const password = await proveByPasswordReset(owner);
      const relogin = await passwordLogin(t, owner, password);
      peer.signInAs(victimAt(owner));
      await new Browser(t.app, SERVICE).go(START, {
        headers: { authorization: `Bearer ${relogin.json().jwt_token}` },
      });
      assert.equal((await linksOf(t, me.userId)).length, 1);
      await followMagicLink(owner);
      assert.equal((await linksOf(t, me.userId)).length, 1, 'the link stays');
      assert.equal((await passwordLogin(t, owner, password)).statusCode, 200, 'the password stays');
    });

    it('the owner of an unproven address links the provider explicitly while signed in', async () => {
      const owner = newEmail('owner');
      const me = await registerActive(t, owner);
      const p = victimAt(owner);
      peer.signInAs(p);
      const linked = await new Browser(t.app, SERVICE).go(START, {
        headers: { authorization: `Bearer ${me.jwt}` },
      });
      assert.equal((await sessionOf(t, refreshTokenOf(linked))).user.id, me.userId);
      // Signing in with that identity later reaches the account (by subject, not by email).
      peer.signInAs(p);
      const again = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(again.user.id, me.userId);
    });

    it('an account made by a provider that vouches for the address has it proven: another provider identity with it links', async () => {
      const email = newEmail('provider-made');
      peer.signInAs(victimAt(email));
      const first = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      peer.signInAs(victimAt(email)); // another subject, same vouched address
      // One provider has one link per account: the second identity is refused as already linked, which
      // shows it reached the proven account rather than being refused for the address.
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_ALREADY_LINKED');
      assert.equal((await linksOf(t, first.user.id)).length, 1);
    });

    it('an account set back to pending (active=false, as HBP operators do) loses its password, second factor and sessions to the provider\u2019s proof', async () => {
      const victim = newEmail('victim');
      const attacker = await registerActive(t, victim);
      const login = await passwordLogin(t, victim, ATTACKER_PASSWORD);
      assert.equal(login.statusCode, 200, login.body);
      const refresh = login.json().refresh_token as string;
      const gen = await post(t, '/auth/mfa/generate', {}, attacker.jwt);
      assert.equal(gen.statusCode, 200, gen.body);
      const secret = gen.json().otp_secret as string;
      const code = authenticatorCode(secret, t.clock.now().getTime());
      const en = await post(t, '/auth/mfa/enable', { code }, attacker.jwt);
      assert.equal(en.statusCode, 204, en.body);
      await t.ctx.db.query('test-pend', 'UPDATE auth.accounts SET active = false WHERE user_id = $1', [
        attacker.userId,
      ]);

      peer.signInAs(victimAt(victim));
      const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(s.user.id, attacker.userId, 'the pending account, completed');
      assert.equal((await passwordLogin(t, victim, ATTACKER_PASSWORD)).statusCode, 401);
      const old = await t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refresh}` });
      assert.equal(old.statusCode, 401, 'the registrant\u2019s session ended');
      const { rows } = await t.ctx.db.query<{ mfa_enabled: boolean; otp_secret: string | null }>(
        'test-mfa',
        'SELECT mfa_enabled, otp_secret FROM auth.accounts WHERE user_id = $1',
        [attacker.userId],
      );
      assert.deepEqual(rows[0], { mfa_enabled: false, otp_secret: null });
    });

    describe('VERIFY_EMAILS=true', () => {
      let v: MailTestApp;
      before(async () => {
        v = await buildMailApp(kind, { ...oidc, OIDC_ISSUER: peer.issuer, VERIFY_EMAILS: true });
      });
      after(async () => v?.close());

      it('an address confirmed from its mailbox (email change) is proven, and provider sign-in links it', async () => {
        const me = await registerActive(v, newEmail('mover'));
        const target = newEmail('confirmed');
        const asked = await post(v, '/auth/change-email/request', { new_email: target }, me.jwt);
        assert.equal(asked.statusCode, 204, asked.body);
        await v.ctx.tasks.idle();
        const ticket = v.smtp.last(target).headers.get('x-ticket') as string;
        const done = await post(v, '/auth/change-email/change', { ticket });
        assert.equal(done.statusCode, 204, done.body);
        peer.signInAs(victimAt(target));
        const s = await sessionOf(v, refreshTokenOf(await new Browser(v.app, SERVICE).go(START)));
        assert.equal(s.user.id, me.userId);
      });
    });

    describe('a pending registration (AUTO_ACTIVATE_NEW_USERS=false)', () => {
      let p: MailTestApp;
      before(async () => {
        p = await buildMailApp(kind, {
          ...oidc,
          OIDC_ISSUER: peer.issuer,
          AUTO_ACTIVATE_NEW_USERS: false,
          REGISTRATION_CUSTOM_FIELDS: ['display_name'],
        });
      });
      after(async () => p?.close());

      it('is completed by the provider\u2019s proof and keeps nothing the unproven registrant chose', async () => {
        const victim = newEmail('victim');
        const reg = await post(p, '/auth/register', {
          email: victim,
          password: ATTACKER_PASSWORD,
          user_data: { display_name: 'Support Team' },
        });
        assert.equal(reg.statusCode, 200, reg.body);
        peer.signInAs(victimAt(victim));
        const s = await sessionOf(p, refreshTokenOf(await new Browser(p.app, SERVICE).go(START)));
        assert.equal(s.user.email, victim);
        assert.notEqual(s.user.display_name, 'Support Team');
        const login = await passwordLogin(p, victim, ATTACKER_PASSWORD);
        assert.equal(login.statusCode, 401, 'the registrant\u2019s password is gone');
        // The registration link in the inbox is spent: the address is the provider user's now.
        const ticket = p.smtp.last(victim).headers.get('x-ticket') as string;
        const link = await p.app.inject({ method: 'GET', url: `/auth/activate?ticket=${ticket}` });
        assert.doesNotMatch(`${link.headers.location ?? ''} ${link.body}`, /refresh_token/);
      });
    });
  });
}
