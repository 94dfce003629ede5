/**
 * Issue 29: passkeys over HTTP with a software authenticator in this process. The happy paths (add a
 * passkey, sign in, sign up, step up, rename, delete) and every refusal the WebAuthn specification asks
 * of a relying party, each played as the attack it stands for: a replayed or expired challenge, a
 * challenge of another ceremony, a page of another origin, a credential made for another RP, the
 * user-presence and user-verification flags, a cloned authenticator, an unknown credential, a forged
 * signature, one credential on two accounts, and malformed input. A refused ceremony leaves nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { dbKinds } from '../helpers/db.ts';
import { findLink } from '../helpers/smtp.ts';
import { buildMailApp, createAccount, type MailTestApp } from '../mail/fixtures.ts';
import { FLAG_UP, FLAG_UV, otherKey, SoftAuthenticator } from './authenticator.ts';

const ORIGIN = 'http://gatehouse.test';
const RP_ID = 'gatehouse.test';
const PASSWORD = 'a password of the owner';

let n = 0;
const address = (what: string) => `${what}-${process.pid}-${++n}@example.com`;

type Json = Record<string, unknown>;

function post(t: MailTestApp, url: string, payload: Json, jwt?: string) {
  return t.app.inject({
    method: 'POST',
    url,
    payload,
    headers: jwt === undefined ? {} : { authorization: `Bearer ${jwt}` },
  });
}

async function ok(res: { statusCode: number; body: string; json(): unknown }, status = 200): Promise<Json> {
  assert.equal(res.statusCode, status, res.body);
  return res.json() as Json;
}

function refused(
  res: { statusCode: number; body: string; json(): unknown },
  status: number,
  code: string,
): void {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as Json;
  assert.equal(body.code, code, res.body);
  assert.equal(body.statusCode, status);
  assert.equal(typeof body.message, 'string');
}

async function passwordSignIn(t: MailTestApp, email: string): Promise<string> {
  const body = await ok(await post(t, '/auth/login', { email, password: PASSWORD, cookie: false }));
  return body.jwt_token as string;
}

async function count(t: MailTestApp, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>('TestCount', sql, params);
  return Number(rows[0]?.n ?? 0);
}

for (const kind of dbKinds()) {
  describe(`passkeys [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { WEBAUTHN_ENABLED: true, LOST_PASSWORD_ENABLED: true });
    });
    after(() => t.close());

    /** An account with a password, signed in just now, and an authenticator that added a passkey to it. */
    async function ownerWithPasskey() {
      const email = address('owner');
      const { accountId } = await createAccount(t, { email, password: PASSWORD });
      const jwt = await passwordSignIn(t, email);
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
      const made = auth.create(options as never);
      const added = await ok(
        await post(t, '/auth/passkeys/register/verify', { credential: made.json, name: 'Laptop' }, jwt),
        201,
      );
      return { email, accountId, jwt, auth, added };
    }

    async function loginOptions() {
      return (await ok(await post(t, '/auth/passkeys/login/options', {}))).options as {
        challenge: string;
        rpId: string;
      };
    }

    it('adds a passkey to a signed-in account, and the answer carries no public key', async () => {
      const { added, jwt } = await ownerWithPasskey();
      assert.equal(added.name, 'Laptop');
      assert.equal(added.backed_up, true);
      assert.deepEqual(added.transports, ['internal', 'hybrid']);
      assert.equal(added.last_used_at, null);
      assert.deepEqual(Object.keys(added).sort(), [
        'backed_up',
        'created_at',
        'credential_id',
        'id',
        'last_used_at',
        'name',
        'transports',
      ]);
      const list = await t.app.inject({
        method: 'GET',
        url: '/auth/passkeys',
        headers: { authorization: `Bearer ${jwt}` },
      });
      assert.equal(list.statusCode, 200);
      assert.equal(list.json().length, 1);
      assert.ok(!list.body.includes('public_key'));
    });

    it('asks for a resident key, excludes the passkeys already there, and sends no allowCredentials to sign in', async () => {
      const { jwt, added } = await ownerWithPasskey();
      const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
      const o = options as Json & { authenticatorSelection: Json; excludeCredentials: { id: string }[] };
      assert.equal(o.authenticatorSelection.residentKey, 'required');
      assert.equal(o.attestation, 'none');
      assert.deepEqual(
        o.excludeCredentials.map((c) => c.id),
        [added.credential_id],
      );
      const login = (await ok(await post(t, '/auth/passkeys/login/options', {}))).options as Json;
      assert.equal(login.allowCredentials, undefined);
      assert.equal(login.rpId, RP_ID);
    });

    it('signs in with the passkey: a session of method passkey, fresh for the sensitive-action window', async () => {
      const { auth, accountId } = await ownerWithPasskey();
      const assertion = auth.get(await loginOptions());
      const body = await ok(
        await post(t, '/auth/passkeys/login/verify', { credential: assertion, cookie: false }),
      );
      assert.equal(typeof body.refresh_token, 'string');
      const claims = decodeJwt(body.jwt_token as string);
      assert.ok(Math.abs((claims.auth_time as number) - t.clock.now().getTime() / 1000) < 2);
      const sessions = await t.app.inject({
        method: 'GET',
        url: '/auth/sessions',
        headers: { authorization: `Bearer ${body.jwt_token}` },
      });
      const current = sessions.json().find((s: { current: boolean }) => s.current);
      assert.equal(current.sign_in_method, 'passkey');
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.passkeys WHERE account_id = $1 AND last_used_at IS NOT NULL',
          [accountId],
        ),
        1,
      );
    });

    it('sets the session cookies as POST /auth/login does', async () => {
      const { auth } = await ownerWithPasskey();
      const res = await post(t, '/auth/passkeys/login/verify', {
        credential: auth.get(await loginOptions()),
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().refresh_token, undefined);
      const cookies = String(res.headers['set-cookie']);
      assert.match(cookies, /refresh_token=/);
      assert.match(cookies, /HttpOnly/i);
    });

    it('signs up with a passkey: an active account without a password, signed in; then signs in with it', async () => {
      const email = address('signup');
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const { options } = await ok(
        await post(t, '/auth/passkeys/signup/options', { email, display_name: 'Ada' }),
      );
      const o = options as { user: { name: string; displayName: string } };
      assert.equal(o.user.name, email);
      assert.equal(o.user.displayName, 'Ada');
      const made = auth.create(options as never);
      const body = await ok(
        await post(t, '/auth/passkeys/signup/verify', { credential: made.json, cookie: false }),
      );
      assert.equal((body.user as Json).email, email);
      assert.equal((body.user as Json).display_name, 'Ada');
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.accounts WHERE email = $1 AND password_hash IS NULL AND active',
          [email],
        ),
        1,
      );
      const again = await ok(
        await post(t, '/auth/passkeys/login/verify', {
          credential: auth.get(await loginOptions()),
          cookie: false,
        }),
      );
      assert.equal((again.user as Json).email, email);
      // A taken address is said at once when auto-activation answers with tokens, before any passkey is made.
      refused(await post(t, '/auth/passkeys/signup/options', { email }), 400, 'ACCOUNT_EXISTS');
    });

    it('steps up with a passkey: a token whose auth_time is now opens the sensitive changes again', async () => {
      const { auth, jwt: first, email } = await ownerWithPasskey();
      void first;
      t.clock.advance((t.config.SENSITIVE_ACTION_WINDOW + 60) * 1000);
      // An old sign-in: the sensitive change is refused (a refresh would keep the old auth_time).
      const stale = await passwordSignInAt(t, email);
      refused(await post(t, '/auth/passkeys/register/options', {}, stale), 403, 'REAUTHENTICATION_REQUIRED');
      const { options } = await ok(await post(t, '/auth/passkeys/reauthenticate/options', {}, stale));
      const stepped = await ok(
        await post(
          t,
          '/auth/passkeys/reauthenticate/verify',
          { credential: auth.get(options as never) },
          stale,
        ),
      );
      const claims = decodeJwt(stepped.jwt_token as string);
      assert.ok(Math.abs((claims.auth_time as number) - t.clock.now().getTime() / 1000) < 2);
      assert.equal(claims.sid, decodeJwt(stale).sid);
      await ok(await post(t, '/auth/passkeys/register/options', {}, stepped.jwt_token as string));
    });

    /** A password sign-in whose sign-in instant is older than the window (made, then the clock moves on). */
    async function passwordSignInAt(tt: MailTestApp, email: string): Promise<string> {
      const res = await post(tt, '/auth/login', { email, password: PASSWORD, cookie: false });
      const refresh = res.json().refresh_token as string;
      tt.clock.advance((tt.config.SENSITIVE_ACTION_WINDOW + 60) * 1000);
      const r = await tt.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${refresh}` });
      return r.json().jwt_token as string;
    }

    it('refuses a step-up with a passkey of another account', async () => {
      const victim = await ownerWithPasskey();
      const thief = await ownerWithPasskey();
      const { options } = await ok(await post(t, '/auth/passkeys/reauthenticate/options', {}, victim.jwt));
      refused(
        await post(
          t,
          '/auth/passkeys/reauthenticate/verify',
          { credential: thief.auth.get(options as never) },
          victim.jwt,
        ),
        401,
        'PASSKEY_INVALID',
      );
    });

    it('renames a passkey, and answers 404 for an id that is not one of yours', async () => {
      const { jwt, added } = await ownerWithPasskey();
      const other = await ownerWithPasskey();
      const res = await t.app.inject({
        method: 'PATCH',
        url: `/auth/passkeys/${added.id}`,
        payload: { name: 'Phone' },
        headers: { authorization: `Bearer ${jwt}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().name, 'Phone');
      for (const id of [other.added.id, 'not-a-uuid']) {
        const miss = await t.app.inject({
          method: 'PATCH',
          url: `/auth/passkeys/${id}`,
          payload: { name: 'Mine now' },
          headers: { authorization: `Bearer ${jwt}` },
        });
        refused(miss, 404, 'PASSKEY_NOT_FOUND');
      }
    });

    it('deletes a passkey of an account that keeps its password; the passkey no longer signs in', async () => {
      const { jwt, added, auth } = await ownerWithPasskey();
      const res = await t.app.inject({
        method: 'DELETE',
        url: `/auth/passkeys/${added.id}`,
        headers: { authorization: `Bearer ${jwt}` },
      });
      assert.equal(res.statusCode, 204, res.body);
      refused(
        await post(t, '/auth/passkeys/login/verify', { credential: auth.get(await loginOptions()) }),
        401,
        'PASSKEY_INVALID',
      );
    });

    it('refuses to delete the only way to sign in (409 LAST_SIGN_IN_METHOD), and a deletion without a recent sign-in', async () => {
      const email = address('only-passkey');
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const { options } = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
      const body = await ok(
        await post(t, '/auth/passkeys/signup/verify', {
          credential: auth.create(options as never).json,
          cookie: false,
        }),
      );
      const jwt = body.jwt_token as string;
      const list = await t.app.inject({
        method: 'GET',
        url: '/auth/passkeys',
        headers: { authorization: `Bearer ${jwt}` },
      });
      const id = list.json()[0].id as string;
      const del = () =>
        t.app.inject({
          method: 'DELETE',
          url: `/auth/passkeys/${id}`,
          headers: { authorization: `Bearer ${jwt}` },
        });
      refused(await del(), 409, 'LAST_SIGN_IN_METHOD');
      assert.equal(await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE id = $1', [id]), 1);
      t.clock.advance((t.config.SENSITIVE_ACTION_WINDOW + 1) * 1000);
      refused(await del(), 403, 'REAUTHENTICATION_REQUIRED');
    });

    it('deletes passkeys with their account', async () => {
      const { accountId } = await ownerWithPasskey();
      await t.ctx.db.query(
        'TestDeleteUser',
        'DELETE FROM public.users WHERE id = (SELECT user_id FROM auth.accounts WHERE id = $1)',
        [accountId],
      );
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE account_id = $1', [accountId]),
        0,
      );
    });

    it('records passkey_added, sign_in (method passkey), passkey_removed and passkey_clone_detected in the security feed', async () => {
      const { jwt, auth, added } = await ownerWithPasskey();
      const signedIn = await ok(
        await post(t, '/auth/passkeys/login/verify', {
          credential: auth.get(await loginOptions(), { counter: 4 }),
          cookie: false,
        }),
      );
      refused(
        await post(t, '/auth/passkeys/login/verify', {
          credential: auth.get(await loginOptions(), { counter: 2 }),
        }),
        401,
        'PASSKEY_COUNTER_REGRESSED',
      );
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/auth/passkeys/${added.id}`,
        headers: { authorization: `Bearer ${jwt}` },
      });
      assert.equal(del.statusCode, 204, del.body);
      const feed = await t.app.inject({
        method: 'GET',
        url: '/auth/security-events',
        headers: { authorization: `Bearer ${signedIn.jwt_token}` },
      });
      assert.equal(feed.statusCode, 200, feed.body);
      const events = feed.json() as { type: string; details: Json; session_id: string | null }[];
      const of = (type: string) => events.filter((e) => e.type === type);
      assert.deepEqual(of('passkey_added')[0]?.details, { passkey: added.id, name: 'Laptop' });
      assert.deepEqual(of('passkey_removed')[0]?.details, { passkey: added.id, name: 'Laptop' });
      assert.deepEqual(of('passkey_clone_detected')[0]?.details, { passkey: added.id, name: 'Laptop' });
      assert.ok(of('sign_in').some((e) => e.details.method === 'passkey'));
      assert.equal(of('passkey_removed')[0]?.session_id, decodeJwt(jwt).sid);
      assert.ok(!feed.body.includes('public_key'));
    });

    it("pre-registration with auto-activation: the owner's first password reset removes the squatter's passkey", async () => {
      const email = address('squatted');
      const squatter = new SoftAuthenticator(ORIGIN, RP_ID);
      const { options } = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
      await ok(
        await post(t, '/auth/passkeys/signup/verify', {
          credential: squatter.create(options as never).json,
          cookie: false,
        }),
      );
      // The owner of the mailbox resets the password: the first proof of the address.
      assert.equal((await post(t, '/auth/change-password/request', { email })).statusCode, 204);
      const ticket = findLink(t.smtp.last(email).text, 'ticket=').searchParams.get('ticket');
      assert.ok(ticket);
      const reset = await post(t, '/auth/change-password/change', { ticket, new_password: PASSWORD });
      assert.equal(reset.statusCode, 204, reset.body);
      refused(
        await post(t, '/auth/passkeys/login/verify', { credential: squatter.get(await loginOptions()) }),
        401,
        'PASSKEY_INVALID',
      );
      await passwordSignIn(t, email);
    });

    describe('refused ceremonies (the attacks)', () => {
      it('a replayed sign-in (the same answer twice): the challenge is single use', async () => {
        const { auth } = await ownerWithPasskey();
        const assertion = auth.get(await loginOptions());
        await ok(await post(t, '/auth/passkeys/login/verify', { credential: assertion, cookie: false }));
        refused(
          await post(t, '/auth/passkeys/login/verify', { credential: assertion }),
          400,
          'PASSKEY_CHALLENGE_INVALID',
        );
      });

      it('an expired challenge (older than 5 minutes)', async () => {
        const { auth } = await ownerWithPasskey();
        const options = await loginOptions();
        t.clock.advance(5 * 60_000 + 1000);
        refused(
          await post(t, '/auth/passkeys/login/verify', { credential: auth.get(options) }),
          400,
          'PASSKEY_CHALLENGE_INVALID',
        );
      });

      it('a registration challenge used to sign in', async () => {
        const { auth, jwt } = await ownerWithPasskey();
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
        const challenge = (options as { challenge: string }).challenge;
        refused(
          await post(t, '/auth/passkeys/login/verify', { credential: auth.get({ challenge, rpId: RP_ID }) }),
          400,
          'PASSKEY_CHALLENGE_INVALID',
        );
      });

      it("a registration challenge of another account (a passkey planted on someone else's account)", async () => {
        const victim = await ownerWithPasskey();
        const attacker = await ownerWithPasskey();
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, attacker.jwt));
        const made = attacker.auth.create(options as never);
        refused(
          await post(t, '/auth/passkeys/register/verify', { credential: made.json }, victim.jwt),
          400,
          'PASSKEY_CHALLENGE_INVALID',
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE account_id = $1', [
            victim.accountId,
          ]),
          1,
        );
      });

      it('a page of another origin (phishing): sign-in and registration', async () => {
        const { auth, jwt, accountId } = await ownerWithPasskey();
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { origin: 'http://gatehouse.test.evil.example' }),
          }),
          401,
          'PASSKEY_INVALID',
        );
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: auth.create(options as never, { origin: 'https://evil.example' }).json },
            jwt,
          ),
          400,
          'PASSKEY_NOT_VERIFIED',
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE account_id = $1', [accountId]),
          1,
        );
      });

      it('a wrong RP ID hash (a credential made for another site)', async () => {
        const { auth, jwt } = await ownerWithPasskey();
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { rpId: 'evil.example' }),
          }),
          401,
          'PASSKEY_INVALID',
        );
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: auth.create(options as never, { rpId: 'evil.example' }).json },
            jwt,
          ),
          400,
          'PASSKEY_NOT_VERIFIED',
        );
      });

      it('the user-presence flag off (a silent signature, malware on the machine)', async () => {
        const { auth, jwt } = await ownerWithPasskey();
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { flags: FLAG_UV }),
          }),
          401,
          'PASSKEY_INVALID',
        );
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: auth.create(options as never, { flags: FLAG_UV }).json },
            jwt,
          ),
          400,
          'PASSKEY_NOT_VERIFIED',
        );
      });

      it('a counter going backwards (a cloned authenticator) refuses the sign-in', async () => {
        const { auth } = await ownerWithPasskey();
        await ok(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { counter: 10 }),
            cookie: false,
          }),
        );
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { counter: 7 }),
          }),
          401,
          'PASSKEY_COUNTER_REGRESSED',
        );
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { counter: 10 }),
          }),
          401,
          'PASSKEY_COUNTER_REGRESSED',
        );
        // The real authenticator, counting on, still signs in.
        await ok(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { counter: 11 }),
            cookie: false,
          }),
        );
      });

      it('accepts a passkey that never counts (synced passkeys report 0)', async () => {
        const { auth } = await ownerWithPasskey();
        auth.counts = false;
        for (let i = 0; i < 2; i++)
          await ok(
            await post(t, '/auth/passkeys/login/verify', {
              credential: auth.get(await loginOptions()),
              cookie: false,
            }),
          );
      });

      it('an unknown credential', async () => {
        const stranger = new SoftAuthenticator(ORIGIN, RP_ID);
        stranger.create({ challenge: 'x', rp: { id: RP_ID }, user: { id: 'dXNlcg' } });
        refused(
          await post(t, '/auth/passkeys/login/verify', { credential: stranger.get(await loginOptions()) }),
          401,
          'PASSKEY_INVALID',
        );
      });

      it('a signature by another key', async () => {
        const { auth } = await ownerWithPasskey();
        refused(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { key: otherKey() }),
          }),
          401,
          'PASSKEY_INVALID',
        );
      });

      it('a user handle that is not the passkey’s', async () => {
        const { auth } = await ownerWithPasskey();
        const assertion = auth.get(await loginOptions());
        assertion.response.userHandle = 'c29tZW9uZS1lbHNl';
        refused(
          await post(t, '/auth/passkeys/login/verify', { credential: assertion }),
          401,
          'PASSKEY_INVALID',
        );
      });

      it('a credential id already registered, on the same account or another, is refused (409) and leaves nothing', async () => {
        const victim = await ownerWithPasskey();
        const taken = victim.auth.credentials[0]?.id;
        assert.ok(taken);
        // The owner registering the same passkey again.
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, victim.jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: victim.auth.create(options as never, { id: taken }).json },
            victim.jwt,
          ),
          409,
          'PASSKEY_ALREADY_REGISTERED',
        );
        // An attacker claiming the victim's credential id (public: any site the victim signs in to sees it)
        // with a key of their own, on their account and in a sign-up.
        const attacker = await ownerWithPasskey();
        const mine = await ok(await post(t, '/auth/passkeys/register/options', {}, attacker.jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: attacker.auth.create(mine.options as never, { id: taken }).json },
            attacker.jwt,
          ),
          409,
          'PASSKEY_ALREADY_REGISTERED',
        );
        const email = address('dup');
        const signup = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
        refused(
          await post(t, '/auth/passkeys/signup/verify', {
            credential: attacker.auth.create(signup.options as never, { id: taken }).json,
          }),
          409,
          'PASSKEY_ALREADY_REGISTERED',
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE email = $1', [email]),
          0,
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE credential_id = $1', [
            taken.toString('base64url'),
          ]),
          1,
        );
        // The victim's passkey still signs the victim in.
        const signedIn = await ok(
          await post(t, '/auth/passkeys/login/verify', {
            credential: victim.auth.get(await loginOptions(), { credential: victim.auth.credentials[0] }),
            cookie: false,
          }),
        );
        assert.equal((signedIn.user as Json).email, victim.email);
      });

      it('a sign-up whose passkey is refused leaves no account, passkey or session', async () => {
        const email = address('refused');
        const auth = new SoftAuthenticator(ORIGIN, RP_ID);
        const { options } = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
        refused(
          await post(t, '/auth/passkeys/signup/verify', {
            credential: auth.create(options as never, { origin: 'https://evil.example' }).json,
          }),
          400,
          'PASSKEY_NOT_VERIFIED',
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE email = $1', [email]),
          0,
        );
        assert.equal(
          await count(t, 'SELECT count(*)::int AS n FROM auth.passkeys WHERE credential_id = $1', [
            auth.credentials[0]?.id.toString('base64url'),
          ]),
          0,
        );
      });

      it('an account with TOTP: a passkey with user verification is enough, one without it gets the MFA step', async () => {
        const { auth, accountId } = await ownerWithPasskey();
        await t.ctx.db.query('TestMfaOn', 'UPDATE auth.accounts SET mfa_enabled = true WHERE id = $1', [
          accountId,
        ]);
        const withUv = await ok(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions()),
            cookie: false,
          }),
        );
        assert.equal(typeof withUv.jwt_token, 'string');
        const withoutUv = await ok(
          await post(t, '/auth/passkeys/login/verify', {
            credential: auth.get(await loginOptions(), { flags: FLAG_UP }),
            cookie: false,
          }),
        );
        assert.equal(withoutUv.mfa, true);
        assert.equal(typeof withoutUv.ticket, 'string');
        assert.equal(withoutUv.jwt_token, undefined);
      });
    });

    describe('bad input is a 400 with a stable code, never a 500', () => {
      const cases: [string, (c: Json & { response: Json }) => void, string][] = [
        ['clientDataJSON not base64url', (c) => (c.response.clientDataJSON = 'not base64url!'), 'VALIDATION'],
        [
          'clientDataJSON not JSON',
          (c) => (c.response.clientDataJSON = Buffer.from('{oops').toString('base64url')),
          'PASSKEY_MALFORMED',
        ],
        [
          'clientDataJSON without a challenge',
          (c) =>
            (c.response.clientDataJSON = Buffer.from('{"type":"webauthn.get","origin":"x"}').toString(
              'base64url',
            )),
          'PASSKEY_MALFORMED',
        ],
        ['an oversized clientDataJSON', (c) => (c.response.clientDataJSON = 'A'.repeat(9000)), 'VALIDATION'],
        ['a signature of the wrong type', (c) => (c.response.signature = 42), 'VALIDATION'],
        ['authenticatorData too short', (c) => (c.response.authenticatorData = 'AAAA'), 'PASSKEY_MALFORMED'],
        ['id and rawId that differ', (c) => (c.rawId = 'AAAA'), 'PASSKEY_MALFORMED'],
        ['a type other than public-key', (c) => (c.type = 'password'), 'VALIDATION'],
        ['a missing response', (c) => delete (c as Json).response, 'VALIDATION'],
      ];
      for (const [what, bend, code] of cases) {
        it(`sign-in with ${what}`, async () => {
          const { auth } = await ownerWithPasskey();
          const credential = auth.get(await loginOptions()) as unknown as Json & { response: Json };
          bend(credential);
          refused(await post(t, '/auth/passkeys/login/verify', { credential }), 400, code);
        });
      }

      const registration: [string, (c: Json & { response: Json }) => void][] = [
        [
          'an attestation object that is not CBOR',
          (c) => (c.response.attestationObject = Buffer.from('not cbor at all').toString('base64url')),
        ],
        ['an oversized attestation object', (c) => (c.response.attestationObject = 'A'.repeat(40_000))],
      ];
      for (const [what, bend] of registration) {
        it(`registration with ${what}`, async () => {
          const { jwt, auth } = await ownerWithPasskey();
          const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
          const credential = auth.create(options as never).json as unknown as Json & { response: Json };
          bend(credential);
          const res = await post(t, '/auth/passkeys/register/verify', { credential }, jwt);
          assert.equal(res.statusCode, 400, res.body);
          assert.match(res.json().code, /^(VALIDATION|PASSKEY_MALFORMED)$/);
        });
      }

      it('registration with an unknown attestation format', async () => {
        const { jwt, auth } = await ownerWithPasskey();
        const { options } = await ok(await post(t, '/auth/passkeys/register/options', {}, jwt));
        refused(
          await post(
            t,
            '/auth/passkeys/register/verify',
            { credential: auth.create(options as never, { fmt: 'made-up' }).json },
            jwt,
          ),
          400,
          'PASSKEY_MALFORMED',
        );
      });

      it('a sign-in with options of the wrong shape', async () => {
        refused(await post(t, '/auth/passkeys/login/options', { email: 'x@example.com' }), 400, 'VALIDATION');
        refused(await post(t, '/auth/passkeys/login/verify', { credential: 'a string' }), 400, 'VALIDATION');
        refused(await post(t, '/auth/passkeys/signup/options', { email: 'not an email' }), 400, 'VALIDATION');
      });

      it('a sign-up that POST /auth/register would refuse is refused before any passkey is made', async () => {
        const email = address('rules');
        refused(
          await post(t, '/auth/passkeys/signup/options', {
            email,
            register_options: { allowed_roles: ['admin'], default_role: 'admin' },
          }),
          400,
          'ROLES_NOT_ALLOWED',
        );
        refused(
          await post(t, '/auth/passkeys/signup/options', { email, user_data: { not_a_field: 1 } }),
          400,
          'VALIDATION',
        );
        assert.equal(
          await count(
            t,
            'SELECT count(*)::int AS n FROM auth.passkey_challenges WHERE signup::text LIKE $1',
            [`%${email}%`],
          ),
          0,
        );
      });
    });
  });

  describe(`passkeys with WEBAUTHN_USER_VERIFICATION=required [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { WEBAUTHN_ENABLED: true, WEBAUTHN_USER_VERIFICATION: 'required' });
    });
    after(() => t.close());

    it('refuses a registration and a sign-in whose authenticator did not verify the user', async () => {
      const email = address('uv');
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const { options } = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
      assert.equal(
        (options as { authenticatorSelection: Json }).authenticatorSelection.userVerification,
        'required',
      );
      refused(
        await post(t, '/auth/passkeys/signup/verify', {
          credential: auth.create(options as never, { flags: FLAG_UP }).json,
        }),
        400,
        'PASSKEY_NOT_VERIFIED',
      );
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE email = $1', [email]),
        0,
      );
      const again = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
      await ok(
        await post(t, '/auth/passkeys/signup/verify', {
          credential: auth.create(again.options as never).json,
          cookie: false,
        }),
      );
      const login = (await ok(await post(t, '/auth/passkeys/login/options', {}))).options as {
        challenge: string;
      };
      refused(
        await post(t, '/auth/passkeys/login/verify', { credential: auth.get(login, { flags: FLAG_UP }) }),
        401,
        'PASSKEY_INVALID',
      );
    });
  });

  describe(`passkey sign-up with AUTO_ACTIVATE_NEW_USERS=false [${kind}]`, () => {
    let t: MailTestApp;
    before(async () => {
      t = await buildMailApp(kind, { WEBAUTHN_ENABLED: true, AUTO_ACTIVATE_NEW_USERS: false });
    });
    after(() => t.close());

    async function signUp(email: string, auth: SoftAuthenticator) {
      const { options } = await ok(await post(t, '/auth/passkeys/signup/options', { email }));
      return ok(
        await post(t, '/auth/passkeys/signup/verify', { credential: auth.create(options as never).json }),
      );
    }

    async function signInWith(auth: SoftAuthenticator) {
      const options = (await ok(await post(t, '/auth/passkeys/login/options', {}))).options as {
        challenge: string;
      };
      return post(t, '/auth/passkeys/login/verify', { credential: auth.get(options), cookie: false });
    }

    it('answers {user} only and emails an activation link; the passkey signs in once the link is followed', async () => {
      const email = address('pending');
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const body = await signUp(email, auth);
      assert.deepEqual(Object.keys(body), ['user']);
      refused(await signInWith(auth), 401, 'PASSKEY_INVALID');
      const link = findLink(t.smtp.last(email).text, '/auth/activate');
      const activated = await t.app.inject({ method: 'GET', url: `${link.pathname}${link.search}` });
      assert.ok([200, 302].includes(activated.statusCode), activated.body);
      const signedIn = await ok(await signInWith(auth));
      assert.equal((signedIn.user as Json).email, email);
    });

    it("answers a taken address like a new one, and keeps none of the attempt's passkey", async () => {
      const email = address('taken');
      await createAccount(t, { email, password: PASSWORD });
      const auth = new SoftAuthenticator(ORIGIN, RP_ID);
      const body = await signUp(email, auth);
      assert.deepEqual(Object.keys(body), ['user']);
      assert.match(t.smtp.last(email).subject ?? '', /.+/);
      refused(await signInWith(auth), 401, 'PASSKEY_INVALID');
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.passkeys p JOIN auth.accounts a ON a.id = p.account_id WHERE a.email = $1',
          [email],
        ),
        0,
      );
    });

    it("pre-registration: an attacker's passkey on a waiting account is gone when the owner activates it", async () => {
      const email = address('prehijack');
      const attacker = new SoftAuthenticator(ORIGIN, RP_ID);
      await signUp(email, attacker);
      // The owner registers the address too (a second link), and follows the link of their own attempt.
      const res = await post(t, '/auth/register', { email, password: PASSWORD });
      assert.equal(res.statusCode, 200, res.body);
      const link = findLink(t.smtp.last(email).text, '/auth/activate');
      const activated = await t.app.inject({ method: 'GET', url: `${link.pathname}${link.search}` });
      assert.ok([200, 302].includes(activated.statusCode), activated.body);
      refused(await signInWith(attacker), 401, 'PASSKEY_INVALID');
      assert.equal(
        await count(
          t,
          'SELECT count(*)::int AS n FROM auth.passkeys p JOIN auth.accounts a ON a.id = p.account_id WHERE a.email = $1',
          [email],
        ),
        0,
      );
      // Following the attacker's link later changes nothing: every registration link stopped working.
      const first = findLink(t.smtp.to(email)[0]?.text ?? '', '/auth/activate');
      await t.app.inject({ method: 'GET', url: `${first.pathname}${first.search}` });
      refused(await signInWith(attacker), 401, 'PASSKEY_INVALID');
    });
  });
}

describe('passkey settings', () => {
  it('a production start with passkeys on and no RP ID stops with a message', async () => {
    const { configFrom, ConfigError, loadConfig } = await import('../../src/config.ts');
    assert.throws(
      () =>
        configFrom({
          NODE_ENV: 'production',
          WEBAUTHN_ENABLED: true,
          DATABASE_URL: 'postgres://x@127.0.0.1/x',
          COOKIE_SECRET: 'c'.repeat(40),
        }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.some((p) => /WEBAUTHN_RP_ID is required in production/.test(p)),
    );
    assert.throws(
      () => configFrom({ WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: ['https://evil.example'] }),
      (err: unknown) =>
        err instanceof ConfigError && err.problems.some((p) => /not on WEBAUTHN_RP_ID/.test(p)),
    );
    assert.throws(
      () => loadConfig({ WEBAUTHN_ORIGINS: 'https://app.example.com/path' }),
      (err: unknown) => err instanceof ConfigError && err.problems.some((p) => /WEBAUTHN_ORIGINS/.test(p)),
    );
    const c = configFrom({ SERVER_URL: 'https://auth.example.com' });
    assert.equal(c.WEBAUTHN_ENABLED, true);
    assert.equal(c.WEBAUTHN_RP_ID, 'auth.example.com');
    assert.deepEqual(c.WEBAUTHN_ORIGINS, ['https://auth.example.com']);
    assert.equal(configFrom({ NODE_ENV: 'test' }).WEBAUTHN_USER_VERIFICATION, 'preferred');
  });
});

describe('passkey sign-ins in /metrics', () => {
  it('counts passkey sign-ins by outcome: success, refused, cloned', async () => {
    const { buildTestApp } = await import('../helpers/app.ts');
    const { HS } = await import('../helpers/accounts.ts');
    const TOKEN = 'a-metrics-token-of-at-least-32-characters';
    const t = await buildTestApp('pglite', { ...HS, METRICS_TOKEN: TOKEN, RATE_LIMIT_ENABLED: false });
    try {
      const send = (url: string, payload: Json) => t.app.inject({ method: 'POST', url, payload });
      const auth = new SoftAuthenticator('http://localhost:3000', 'localhost');
      const signup = await send('/auth/passkeys/signup/options', { email: address('metrics') });
      await ok(
        await send('/auth/passkeys/signup/verify', {
          credential: auth.create(signup.json().options).json,
          cookie: false,
        }),
      );
      const options = async () => (await send('/auth/passkeys/login/options', {})).json().options;
      await ok(
        await send('/auth/passkeys/login/verify', {
          credential: auth.get(await options(), { counter: 5 }),
          cookie: false,
        }),
      );
      refused(
        await send('/auth/passkeys/login/verify', {
          credential: auth.get(await options(), { key: otherKey() }),
        }),
        401,
        'PASSKEY_INVALID',
      );
      refused(
        await send('/auth/passkeys/login/verify', { credential: auth.get(await options(), { counter: 3 }) }),
        401,
        'PASSKEY_COUNTER_REGRESSED',
      );
      const scrape = await t.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(scrape.statusCode, 200);
      const value = (outcome: string) =>
        Number(
          new RegExp(`gatehouse_sign_ins_total\\{method="passkey",outcome="${outcome}"\\} (\\d+)`).exec(
            scrape.body,
          )?.[1] ?? 0,
        );
      assert.ok(value('success') >= 1, scrape.body);
      assert.ok(value('refused') >= 1);
      assert.ok(value('cloned') >= 1);
    } finally {
      await t.close();
    }
  });
});
