/**
 * Sign in with Apple against oidc-provider standing in for Apple: the callback is a cross-site form POST
 * (response_mode=form_post), and the client secret is an ES256 JWT from the team's key, which the peer
 * checks as Apple does (issuer = team, subject = client, audience = Apple, key id) before the exchange.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { ConfigError } from '../../src/config.ts';
import { newEmail } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { dbKinds } from '../helpers/db.ts';
import { type OidcPeer, startOidcPeer } from '../helpers/oidc-peer.ts';
import {
  assertFailed,
  callback,
  FAILURE,
  linksOf,
  provenAccount,
  refreshTokenOf,
  SERVICE,
  SUCCESS,
  sessionOf,
} from './helpers.ts';

const TEAM = 'TEAM123456';
const KEY_ID = 'KEY1234567';
const CLIENT_ID = 'com.example.app';
/** What the peer knows the client by, once it has checked the JWT secret. */
const PEER_SECRET = 'checked-apple-client-secret';
const START = `${SERVICE}/auth/providers/apple`;

for (const db of dbKinds()) {
  describe(`Sign in with Apple [${db}]`, () => {
    let peer: OidcPeer;
    let t: TestApp;
    const secrets: string[] = [];
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

    before(async () => {
      peer = await startOidcPeer({
        clients: [
          {
            client_id: CLIENT_ID,
            client_secret: PEER_SECRET,
            redirect_uris: [callback('apple')],
            token_endpoint_auth_method: 'client_secret_post',
          },
        ],
        claimsInIdToken: true,
      });
      // Apple's check of the client secret, then the exchange goes on with the peer's own secret.
      peer.beforeToken = async (body) => {
        const jwt = body.get('client_secret') ?? '';
        secrets.push(jwt);
        let ok = false;
        try {
          await jwtVerify(jwt, publicKey, {
            issuer: TEAM,
            subject: CLIENT_ID,
            audience: peer.issuer,
            algorithms: ['ES256'],
          });
          ok = decodeProtectedHeader(jwt).kid === KEY_ID;
        } catch {
          ok = false;
        }
        body.set('client_secret', ok ? PEER_SECRET : 'refused');
        return body;
      };
      const p8 = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
      t = await buildTestApp(db, {
        SERVER_URL: SERVICE,
        REDIRECT_URL_SUCCESS: SUCCESS,
        PROVIDER_FAILURE_REDIRECT: FAILURE,
        APPLE_ENABLED: true,
        APPLE_CLIENT_ID: CLIENT_ID,
        APPLE_TEAM_ID: TEAM,
        APPLE_KEY_ID: KEY_ID,
        // HBP's format: base64 of the .p8 file.
        APPLE_PRIVATE_KEY: Buffer.from(p8).toString('base64'),
        APPLE_ISSUER: peer.issuer,
      });
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    it('signs in through a form POST callback, with the name Apple sends once and a JWT client secret', async () => {
      const email = newEmail('apple');
      peer.signInAs({ sub: `apple-${Date.now()}`, email, email_verified: 'true' });
      const b = new Browser(t.app, SERVICE);
      b.formExtras = { user: JSON.stringify({ name: { firstName: 'Ada', lastName: 'Lovelace' }, email }) };
      const page = await b.go(START);
      const s = await sessionOf(t, refreshTokenOf(page));
      assert.equal(s.user.display_name, 'Ada Lovelace');
      assert.equal(s.user.email, email);
      assert.ok(b.visited.includes(callback('apple')), 'the callback was a POST to the callback URL');
      const auth = new URL(b.visited.find((u) => u.startsWith(`${peer.issuer}/auth?`)) as string);
      assert.equal(auth.searchParams.get('response_mode'), 'form_post');
      assert.equal(secrets.length, 1);
      // The binding cookie reaches a cross-site POST only as SameSite=None; Secure.
      const start = await t.app.inject({ method: 'GET', url: '/auth/providers/apple' });
      assert.match(String(start.headers['set-cookie']), /oauth_binding_post=.*SameSite=None/i);
      assert.match(String(start.headers['set-cookie']), /Secure/);
    });

    it('links an existing account by the address Apple vouches for (email_verified "true")', async () => {
      const owner = await provenAccount(t, newEmail('apple-owner'));
      peer.signInAs({ sub: `apple-owner-${Date.now()}`, email: owner.email, email_verified: 'true' });
      const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(s.user.id, owner.userId);
      assert.equal((await linksOf(t, owner.userId))[0]?.auth_provider, 'apple');
    });

    it('a callback by GET, or without the cross-site cookie, does not finish the sign-in', async () => {
      const get = await t.app.inject({ method: 'GET', url: '/auth/providers/apple/callback?state=x&code=y' });
      assert.equal(get.statusCode, 404);
      const post = await t.app.inject({
        method: 'POST',
        url: '/auth/providers/apple/callback',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'state=forged&code=y',
      });
      assert.equal(post.statusCode, 302);
      assertFailed(
        { status: 302, url: '', body: '', headers: {}, location: post.headers.location as string },
        'PROVIDER_STATE_INVALID',
      );
    });
  });
}

describe('Sign in with Apple: an unreadable key', () => {
  it('is a start error naming APPLE_PRIVATE_KEY, said with the other settings, never at a sign-in', async () => {
    const secret = 'not-a-key-but-secret-looking-value';
    await assert.rejects(
      buildTestApp('pglite', {
        SERVER_URL: SERVICE,
        APPLE_ENABLED: true,
        APPLE_CLIENT_ID: CLIENT_ID,
        APPLE_TEAM_ID: TEAM,
        APPLE_KEY_ID: KEY_ID,
        APPLE_PRIVATE_KEY: secret,
      }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.deepEqual(err.problems, [
          'APPLE_PRIVATE_KEY is not a readable private key (base64 of the .p8 file, or its PEM text)',
        ]);
        assert.ok(!err.message.includes(secret));
        return true;
      },
    );
  });
});
