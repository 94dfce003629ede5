/**
 * Sign-in with a generic OpenID Connect provider (and Google, which is one), against oidc-provider in
 * the test process: the happy path, every way a `state` can be wrong, ID tokens that must not sign anyone
 * in, account linking by email only when the provider vouches for it, MFA, linking and unlinking by a
 * signed-in user, provider tokens, and a provider that is down.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { newEmail, signUp, snapshot } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { dbKinds } from '../helpers/db.ts';
import { type OidcPeer, startOidcPeer } from '../helpers/oidc-peer.ts';
import { authenticatorCode } from '../mfa/helpers.ts';
import {
  accountCount,
  assertFailed,
  callback,
  FAILURE,
  landing,
  linksOf,
  provenAccount,
  refreshTokenOf,
  SERVICE,
  SUCCESS,
  sessionOf,
} from './helpers.ts';

const CLIENT = { client_id: 'gatehouse', client_secret: 'peer-client-secret-0123456789' };
const START = `${SERVICE}/auth/providers/oidc`;

for (const kind of dbKinds()) {
  describe(`OpenID Connect sign-in [${kind}]`, () => {
    let peer: OidcPeer;
    let t: TestApp;
    let browser: Browser;
    let n = 0;
    /** A person at the provider, new to the service. */
    const person = (extra: Record<string, unknown> = {}) => {
      n += 1;
      return {
        sub: `person-${n}-${Date.now()}`,
        email: newEmail('oidc'),
        email_verified: true,
        name: `Person ${n}`,
        ...extra,
      };
    };

    before(async () => {
      peer = await startOidcPeer({
        clients: [{ ...CLIENT, redirect_uris: [callback('oidc'), callback('google')] }],
      });
      t = await buildTestApp(kind, {
        SERVER_URL: SERVICE,
        REDIRECT_URL_SUCCESS: SUCCESS,
        PROVIDER_FAILURE_REDIRECT: FAILURE,
        ALLOWED_REDIRECT_URLS: ['http://app.test/elsewhere'],
        OIDC_ENABLED: true,
        OIDC_ISSUER: peer.issuer,
        OIDC_CLIENT_ID: CLIENT.client_id,
        OIDC_CLIENT_SECRET: CLIENT.client_secret,
        GOOGLE_ENABLED: true,
        GOOGLE_ISSUER: peer.issuer,
        GOOGLE_CLIENT_ID: CLIENT.client_id,
        GOOGLE_CLIENT_SECRET: CLIENT.client_secret,
        PROVIDER_TOKENS_STORED: true,
        SENSITIVE_ACTION_WINDOW: 300,
      });
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });
    beforeEach(() => {
      browser = new Browser(t.app, SERVICE);
      // The peer signs with the real clock; tests that move the service's clock start again from it.
      t.clock.set(new Date());
    });

    it('creates an account from a new identity and redirects with a refresh token (PKCE S256, nonce)', async () => {
      const p = person({ picture: 'https://img.example/p.png' });
      peer.signInAs(p);
      const page = await browser.go(START);
      const refresh = refreshTokenOf(page);
      assert.match(String(page.headers['set-cookie']), /refresh_token=/, 'session cookie as for login');
      const s = await sessionOf(t, refresh);
      assert.equal(s.user.email, p.email);
      assert.equal(s.user.display_name, p.name);
      assert.equal(s.user.avatar_url, 'https://img.example/p.png');
      assert.deepEqual(await linksOf(t, s.user.id), [
        { auth_provider: 'oidc', auth_provider_unique_id: `${peer.issuer}#${p.sub}` },
      ]);
      const auth = new URL(browser.visited.find((u) => u.startsWith(`${peer.issuer}/auth?`)) as string);
      assert.equal(auth.searchParams.get('code_challenge_method'), 'S256');
      assert.ok((auth.searchParams.get('nonce') ?? '').length >= 43);
      const token = peer.requests.findLast((r) => r.path === '/token');
      assert.ok(
        new URLSearchParams(token?.body).get('code_verifier'),
        'the code was redeemed with its verifier',
      );
    });

    it('signs the same identity in to the same account again, as a fresh sign-in for sensitive changes', async () => {
      const p = person();
      peer.signInAs(p);
      const first = await sessionOf(t, refreshTokenOf(await browser.go(START)));
      const before = await accountCount(t);
      t.clock.advance(301_000);
      peer.signInAs(p);
      const again = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(again.user.id, first.user.id);
      assert.equal(await accountCount(t), before);
      const generate = (jwt: string) =>
        t.app.inject({
          method: 'POST',
          url: '/auth/mfa/generate',
          headers: { authorization: `Bearer ${jwt}` },
        });
      // The first sign-in is now older than SENSITIVE_ACTION_WINDOW; the second one (auth_time) is fresh.
      const old = await sessionOf(t, first.refresh_token);
      assert.equal((await generate(old.jwt_token)).statusCode, 403);
      const gen = await generate(again.jwt_token);
      assert.equal(gen.statusCode, 200, gen.body);
    });

    it('lands on an allowed redirect_to, and refuses one that is not allowed', async () => {
      peer.signInAs(person());
      refreshTokenOf(
        await browser.go(`${START}?redirect_to=${encodeURIComponent('http://app.test/elsewhere')}`),
        'http://app.test/elsewhere',
      );
      const bad = await browser.go(`${START}?redirect_to=${encodeURIComponent('https://evil.test/steal')}`);
      assert.equal(bad.status, 400);
      assert.equal(JSON.parse(bad.body).code, 'REDIRECT_NOT_ALLOWED');
    });

    it('cookie=false sets no session cookie', async () => {
      peer.signInAs(person());
      const page = await browser.go(`${START}?cookie=false`);
      refreshTokenOf(page);
      assert.doesNotMatch(String(page.headers['set-cookie'] ?? ''), /refresh_token=/);
    });

    describe('state', () => {
      it('refuses a forged state (login CSRF), and signs no one in', async () => {
        peer.signInAs(person());
        await browser.go(START); // a real sign-in gives the browser its binding cookie
        const forged = await browser.go(`${callback('oidc')}?state=forged-${Date.now()}&code=whatever`);
        assertFailed(forged, 'PROVIDER_STATE_INVALID');
      });

      it('refuses a callback without state', async () => {
        peer.signInAs(person());
        await browser.go(START);
        assertFailed(await browser.go(`${callback('oidc')}?code=whatever`), 'PROVIDER_STATE_INVALID');
      });

      it('refuses a reused state: the callback works once', async () => {
        peer.signInAs(person());
        const page = await browser.go(START);
        refreshTokenOf(page);
        const cb = browser.visited.find((u) => u.startsWith(callback('oidc'))) as string;
        assertFailed(await browser.go(cb), 'PROVIDER_STATE_INVALID');
      });

      it("refuses another browser's state: an attacker's callback opened in the victim's browser signs no one in", async () => {
        // The attacker signs in at the provider as themselves and keeps the callback URL unused.
        peer.signInAs(person());
        const stolen = await stopAtCallback(new Browser(t.app, SERVICE));
        // The victim's browser has a binding cookie of its own from an earlier sign-in.
        const victim = new Browser(t.app, SERVICE);
        peer.signInAs(person());
        await victim.go(START);
        const before = await snapshot(t);
        assertFailed(await victim.go(stolen), 'PROVIDER_STATE_INVALID');
        assert.equal(await snapshot(t), before);
        // …nor in a browser without any binding cookie.
        assertFailed(await new Browser(t.app, SERVICE).go(stolen), 'PROVIDER_STATE_INVALID');
      });

      it("an attacker who replays the victim's state from another browser cannot use it up: the victim's sign-in still finishes", async () => {
        // The victim's callback URL (state and code) leaks before the victim's browser follows it.
        peer.signInAs(person());
        const victim = new Browser(t.app, SERVICE);
        const leaked = await stopAtCallback(victim);
        // The attacker's browser has a binding cookie of its own.
        const attacker = new Browser(t.app, SERVICE);
        peer.signInAs(person());
        await attacker.go(START);
        const before = await snapshot(t);
        assertFailed(await attacker.go(leaked), 'PROVIDER_STATE_INVALID');
        assertFailed(await attacker.go(leaked), 'PROVIDER_STATE_INVALID');
        assert.equal(await snapshot(t), before);
        refreshTokenOf(await victim.go(leaked));
      });

      it('refuses an expired state', async () => {
        peer.signInAs(person());
        const stopped = await stopAtCallback(browser);
        t.clock.advance(11 * 60_000);
        assertFailed(await browser.go(stopped), 'PROVIDER_STATE_INVALID');
      });
    });

    /**
     * Runs a sign-in up to the provider's redirect to the callback and returns that URL, unused: the
     * browser's requests to the service's callback are not made.
     */
    async function stopAtCallback(b: Browser): Promise<string> {
      const start = await t.app.inject({
        method: 'GET',
        url: '/auth/providers/oidc',
        headers: b.cookie('oauth_binding') ? { cookie: `oauth_binding=${b.cookie('oauth_binding')}` } : {},
      });
      assert.equal(start.statusCode, 302, start.body);
      const set = start.headers['set-cookie'];
      for (const line of Array.isArray(set) ? set : [String(set)]) {
        const m = /^oauth_binding=([^;]+)/.exec(line);
        if (m) b.setCookie('oauth_binding', m[1] as string, '/auth/providers');
      }
      const page = await new Browser(t.app, 'http://not-the-service.test').go(
        start.headers.location as string,
      );
      const to = new URL(page.location as string);
      assert.equal(to.origin + to.pathname, callback('oidc'));
      return to.toString();
    }

    describe('ID token validation', () => {
      const cases: [string, (c: Record<string, unknown>) => Record<string, unknown>, 'peer' | 'stranger'][] =
        [
          ['a wrong nonce', (c) => ({ ...c, nonce: 'another-sign-in' }), 'peer'],
          ['another audience', (c) => ({ ...c, aud: 'another-client' }), 'peer'],
          ['another issuer', (c) => ({ ...c, iss: 'http://127.0.0.1:1/evil' }), 'peer'],
          [
            'an expiry in the past',
            (c) => ({
              ...c,
              exp: Math.floor(Date.now() / 1000) - 3600,
              iat: Math.floor(Date.now() / 1000) - 7200,
            }),
            'peer',
          ],
          ["a signature by a key that is not the issuer's", (c) => c, 'stranger'],
          [
            'an issue time (iat) in the future beyond the allowed skew',
            (c) => ({
              ...c,
              iat: Math.floor(Date.now() / 1000) + 3600,
              exp: Math.floor(Date.now() / 1000) + 7200,
            }),
            'peer',
          ],
        ];
      for (const [what, change, key] of cases) {
        it(`refuses an ID token with ${what}, and creates nothing`, async () => {
          peer.signInAs(person());
          peer.tamperNextIdToken((claims) => ({ claims: change(claims as Record<string, unknown>), key }));
          const before = await snapshot(t);
          assertFailed(await browser.go(START), 'ID_TOKEN_INVALID');
          assert.equal(await snapshot(t), before);
        });
      }
    });

    it('accepts an ID token whose issue time is ahead of our clock within the allowed skew (60 s)', async () => {
      peer.signInAs(person());
      peer.tamperNextIdToken((claims) => ({
        claims: { ...claims, iat: Math.floor(Date.now() / 1000) + 30 },
        key: 'peer',
      }));
      refreshTokenOf(await browser.go(START));
    });

    describe('accounts with the same email', () => {
      it('refuses an unverified email that matches an existing account, and links nothing', async () => {
        const victim = await signUp(t);
        peer.signInAs(person({ email: victim.email, email_verified: false }));
        const before = await snapshot(t);
        assertFailed(await browser.go(START), 'PROVIDER_EMAIL_NOT_VERIFIED');
        assert.equal(await snapshot(t), before);
        assert.deepEqual(await linksOf(t, victim.userId), []);
      });

      it('links a verified email to the existing account whose address is proven', async () => {
        const owner = await provenAccount(t, newEmail('oidc-owner'));
        const p = person({ email: owner.email.toUpperCase(), email_verified: true });
        peer.signInAs(p);
        const s = await sessionOf(t, refreshTokenOf(await browser.go(START)));
        assert.equal(s.user.id, owner.userId);
        assert.equal((await linksOf(t, owner.userId)).length, 1);
      });

      it('Google: a verified address is trusted only where Google is authoritative (gmail.com, or a Workspace hd)', async () => {
        const owner = await provenAccount(t, newEmail('google-owner'));
        peer.signInAs(person({ email: owner.email, email_verified: true }));
        const google = `${SERVICE}/auth/providers/google`;
        assertFailed(await browser.go(google), 'PROVIDER_EMAIL_NOT_VERIFIED');
        peer.signInAs(person({ email: owner.email, email_verified: true, hd: 'example.com' }));
        const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(google)));
        assert.equal(s.user.id, owner.userId);
        assert.equal((await linksOf(t, owner.userId))[0]?.auth_provider, 'google');
      });

      it('does not put an unverified email on a new account', async () => {
        const p = person({ email_verified: false });
        peer.signInAs(p);
        const s = await sessionOf(t, refreshTokenOf(await browser.go(START)));
        assert.equal(s.user.email, null);
        // The address stays free for its owner.
        const r = await t.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email: p.email, password: 'a long enough password' },
        });
        assert.equal(r.statusCode, 200, r.body);
      });
    });

    it('an account with MFA gets the MFA ticket step, not a session', async () => {
      const owner = await provenAccount(t, newEmail('mfa-owner'));
      const p = person({ email: owner.email });
      peer.signInAs(p);
      await browser.go(START);
      const gen = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/generate',
        headers: { authorization: `Bearer ${owner.jwt}` },
      });
      const secret = gen.json().otp_secret as string;
      const en = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/enable',
        headers: { authorization: `Bearer ${owner.jwt}` },
        payload: { code: authenticatorCode(secret, t.clock.now().getTime()) },
      });
      assert.equal(en.statusCode, 204, en.body);
      t.clock.advance(60_000);
      peer.signInAs(p);
      const to = landing(await new Browser(t.app, SERVICE).go(START));
      assert.equal(to.searchParams.get('refresh_token'), null);
      assert.equal(to.searchParams.get('mfa'), 'true');
      const totp = await t.app.inject({
        method: 'POST',
        url: '/auth/mfa/totp',
        payload: {
          ticket: to.searchParams.get('ticket'),
          code: authenticatorCode(secret, t.clock.now().getTime()),
          cookie: false,
        },
      });
      assert.equal(totp.statusCode, 200, totp.body);
      assert.equal(totp.json().user.id, owner.userId);
    });

    describe('linking and unlinking by the signed-in user', () => {
      it('links the identity to the caller (bearer) and keeps the account', async () => {
        const me = await signUp(t);
        const p = person();
        peer.signInAs(p);
        const page = await browser.go(START, { headers: { authorization: `Bearer ${me.jwt}` } });
        assert.equal((await sessionOf(t, refreshTokenOf(page))).user.id, me.userId);
        assert.deepEqual(
          (await linksOf(t, me.userId)).map((l) => l.auth_provider_unique_id),
          [`${peer.issuer}#${p.sub}`],
        );
        // The owner's security feed says a provider was linked (never which identity, nor a token).
        const linked = await feedOf(t, me.jwt, 'provider_linked');
        assert.deepEqual(
          linked.map((e) => e.details),
          [{ provider: 'oidc' }],
        );
        // Signing in with it later reaches the same account.
        peer.signInAs(p);
        const again = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
        assert.equal(again.user.id, me.userId);
      });

      it('needs a recent sign-in to link (a stolen, old access token cannot add a way in)', async () => {
        const me = await signUp(t);
        t.clock.advance(301_000);
        const { signAccessToken, permissionVariables } = await import('../../src/auth/jwt.ts');
        const vars = permissionVariables(
          { userId: me.userId, defaultRole: 'user', roles: ['user'], customFields: {} },
          [],
        );
        const old = new Date(t.clock.now().getTime() - 301_000);
        const stale = (await signAccessToken(t.ctx.keys, t.config, vars, t.clock.now(), { authTime: old }))
          .token;
        peer.signInAs(person());
        const page = await browser.go(START, { headers: { authorization: `Bearer ${stale}` } });
        assertFailed(page, 'REAUTHENTICATION_REQUIRED');
        assert.deepEqual(await linksOf(t, me.userId), []);
      });

      it('refuses a link started by session cookie from another site (CSRF), and links nothing', async () => {
        const me = await signUp(t);
        const login = await t.app.inject({
          method: 'POST',
          url: '/auth/login',
          payload: { email: me.email, password: me.password },
        });
        const cookie = (login.cookies as { name: string; value: string }[]).find(
          (c) => c.name === 'permission_variables',
        );
        assert.ok(cookie);
        browser.setCookie('permission_variables', cookie.value);
        peer.signInAs(person());
        const page = await browser.go(START, {
          headers: { referer: 'https://evil.test/', 'sec-fetch-site': 'cross-site' },
        });
        assert.equal(page.status, 403);
        assert.equal(JSON.parse(page.body).code, 'CSRF');
        assert.deepEqual(await linksOf(t, me.userId), []);
        // From the service's own page it works.
        const ok = await browser.go(START, {
          headers: { referer: `${SERVICE}/`, 'sec-fetch-site': 'same-origin' },
        });
        assert.equal((await sessionOf(t, refreshTokenOf(ok))).user.id, me.userId);
      });

      it('refuses to link an identity that belongs to another account', async () => {
        const p = person();
        peer.signInAs(p);
        await sessionOf(t, refreshTokenOf(await browser.go(START)));
        const me = await signUp(t);
        peer.signInAs(p);
        const page = await new Browser(t.app, SERVICE).go(START, {
          headers: { authorization: `Bearer ${me.jwt}` },
        });
        assertFailed(page, 'PROVIDER_IDENTITY_IN_USE');
        assert.deepEqual(await linksOf(t, me.userId), []);
      });

      it('unlinks while another way to sign in remains, and refuses to remove the last one', async () => {
        peer.signInAs(person());
        const s = await sessionOf(t, refreshTokenOf(await browser.go(START)));
        const unlink = (provider: string) =>
          t.app.inject({
            method: 'POST',
            url: `/auth/providers/${provider}/unlink`,
            headers: { authorization: `Bearer ${s.jwt_token}` },
          });
        const last = await unlink('oidc');
        assert.equal(last.statusCode, 409, last.body);
        assert.equal(last.json().code, 'PROVIDER_LAST_SIGN_IN_METHOD');
        // Link Google too, then the generic one can go.
        peer.signInAs(person());
        await new Browser(t.app, SERVICE).go(`${SERVICE}/auth/providers/google`, {
          headers: { authorization: `Bearer ${s.jwt_token}` },
        });
        assert.equal((await linksOf(t, s.user.id)).length, 2);
        assert.equal((await unlink('oidc')).statusCode, 204);
        assert.deepEqual(
          (await linksOf(t, s.user.id)).map((l) => l.auth_provider),
          ['google'],
        );
        assert.deepEqual(
          (await feedOf(t, s.jwt_token, 'provider_unlinked')).map((e) => e.details),
          [{ provider: 'oidc' }],
        );
        assert.deepEqual(
          (await feedOf(t, s.jwt_token, 'provider_linked')).map((e) => e.details),
          [{ provider: 'google' }],
        );
        const gone = await unlink('oidc');
        assert.equal(gone.statusCode, 404);
        assert.equal(gone.json().code, 'PROVIDER_NOT_LINKED');
      });
    });

    it('keeps the provider tokens encrypted and gives them to the signed-in user', async () => {
      peer.signInAs(person());
      const s = await sessionOf(t, refreshTokenOf(await browser.go(START)));
      const res = await t.app.inject({
        method: 'GET',
        url: '/auth/providers/oidc/tokens',
        headers: { authorization: `Bearer ${s.jwt_token}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      const tokens = res.json();
      assert.equal(tokens.provider, 'oidc');
      assert.ok(tokens.access_token.length > 10);
      assert.ok(tokens.id_token);
      const { rows } = await t.ctx.db.query<{ sealed_tokens: string }>(
        'test-sealed',
        'SELECT sealed_tokens FROM auth.account_provider_tokens',
      );
      assert.ok(rows.length > 0);
      for (const r of rows) {
        assert.match(r.sealed_tokens, /^gh1:/);
        assert.ok(!r.sealed_tokens.includes(tokens.access_token));
      }
      const none = await t.app.inject({
        method: 'GET',
        url: '/auth/providers/google/tokens',
        headers: { authorization: `Bearer ${s.jwt_token}` },
      });
      assert.equal(none.statusCode, 404);
      const anonymous = await t.app.inject({ method: 'GET', url: '/auth/providers/oidc/tokens' });
      assert.equal(anonymous.statusCode, 401);
    });

    it('a person who cancels at the provider lands on the failure URL', async () => {
      const stopped = await stopAtCallback(browser);
      const state = new URL(stopped).searchParams.get('state') as string;
      assertFailed(
        await browser.go(`${callback('oidc')}?error=access_denied&state=${state}`),
        'PROVIDER_DENIED',
      );
    });

    it('answers 404 for a provider that is not enabled', async () => {
      for (const p of ['github', 'twitter', 'apple', 'nope']) {
        const res = await t.app.inject({ method: 'GET', url: `/auth/providers/${p}` });
        assert.equal(res.statusCode, 404, `${p}: ${res.body}`);
        const cb = await t.app.inject({ method: 'GET', url: `/auth/providers/${p}/callback?state=x&code=y` });
        assert.equal(cb.statusCode, 404, `${p} callback: ${cb.body}`);
      }
    });
  });
}

describe('OpenID Connect provider outages', () => {
  it('a provider that cannot be reached lands on the failure URL, or answers 503 with Retry-After', async () => {
    const peer = await startOidcPeer({ clients: [{ ...CLIENT, redirect_uris: [callback('oidc')] }] });
    const issuer = peer.issuer;
    await peer.close();
    const base = {
      SERVER_URL: SERVICE,
      OIDC_ENABLED: true,
      OIDC_ISSUER: issuer,
      OIDC_CLIENT_ID: CLIENT.client_id,
      OIDC_CLIENT_SECRET: CLIENT.client_secret,
      PROVIDER_REQUEST_TIMEOUT: 2000,
    } as const;
    const withFailure = await buildTestApp('pglite', { ...base, PROVIDER_FAILURE_REDIRECT: FAILURE });
    try {
      assertFailed(
        await new Browser(withFailure.app, SERVICE).go(`${SERVICE}/auth/providers/oidc`),
        'PROVIDER_UNAVAILABLE',
      );
    } finally {
      await withFailure.close();
    }
    const bare = await buildTestApp('pglite', base);
    try {
      const res = await bare.app.inject({ method: 'GET', url: '/auth/providers/oidc' });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().code, 'PROVIDER_UNAVAILABLE');
      assert.ok(res.headers['retry-after']);
    } finally {
      await bare.close();
    }
  });

  it('a key set the provider cannot serve (500, or not JSON) is an outage, not a forged ID token', async () => {
    const peer = await startOidcPeer({ clients: [{ ...CLIENT, redirect_uris: [callback('oidc')] }] });
    const t = await buildTestApp('pglite', {
      SERVER_URL: SERVICE,
      REDIRECT_URL_SUCCESS: SUCCESS,
      PROVIDER_FAILURE_REDIRECT: FAILURE,
      OIDC_ENABLED: true,
      OIDC_ISSUER: peer.issuer,
      OIDC_CLIENT_ID: CLIENT.client_id,
      OIDC_CLIENT_SECRET: CLIENT.client_secret,
    });
    try {
      for (const broken of [
        { status: 500, body: '{"error":"down"}' },
        { status: 200, body: '<html>maintenance</html>' },
      ]) {
        peer.brokenKeySet = broken;
        peer.signInAs({ sub: `person-${broken.status}`, email: newEmail('oidc'), email_verified: true });
        const before = await snapshot(t);
        assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_UNAVAILABLE');
        assert.ok(
          peer.requests.some((r) => r.path === '/jwks'),
          'the key set was asked for',
        );
        assert.equal(await snapshot(t), before);
      }
      // Once the key set is back, the same provider signs people in.
      peer.brokenKeySet = undefined;
      peer.signInAs({ sub: 'person-back', email: newEmail('oidc'), email_verified: true });
      refreshTokenOf(await new Browser(t.app, SERVICE).go(START));
    } finally {
      await t.close();
      await peer.close();
    }
  });

  it('answers 404 on /auth/providers/* when no provider is enabled', async () => {
    const t = await buildTestApp('pglite', {});
    try {
      for (const url of [
        '/auth/providers/oidc',
        '/auth/providers/github/callback',
        '/auth/providers/oidc/tokens',
      ]) {
        assert.equal((await t.app.inject({ method: 'GET', url })).statusCode, 404, url);
      }
    } finally {
      await t.close();
    }
  });
});

/** The caller's security events of one type, newest first (GET /auth/security-events). */
async function feedOf(
  t: TestApp,
  jwt: string,
  type: string,
): Promise<{ type: string; details: Record<string, unknown> }[]> {
  const res = await t.app.inject({
    method: 'GET',
    url: '/auth/security-events?limit=100',
    headers: { authorization: `Bearer ${jwt}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { type: string; details: Record<string, unknown> }[]).filter((e) => e.type === type);
}
