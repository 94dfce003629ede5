/**
 * Sign-in with Twitter (OAuth 1.0a) against an OAuth 1.0a service provider in the test process whose
 * signature checks are passport-http-oauth's: request token, the person's approval, access token and
 * the signed profile request. The request token plays the part of `state` and is bound to the browser.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { signUp, snapshot } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { dbKinds } from '../helpers/db.ts';
import { type OAuth1Peer, startOAuth1Peer } from '../helpers/oauth1-peer.ts';
import {
  assertFailed,
  callback,
  FAILURE,
  linksOf,
  refreshTokenOf,
  SERVICE,
  SUCCESS,
  sessionOf,
} from './helpers.ts';

const CONSUMER = { consumerKey: 'twitter-consumer', consumerSecret: 'twitter-consumer-secret-0123456789' };
const START = `${SERVICE}/auth/providers/twitter`;

for (const db of dbKinds()) {
  describe(`Twitter (OAuth 1.0a) sign-in [${db}]`, () => {
    let peer: OAuth1Peer;
    let t: TestApp;
    let n = 0;
    const person = (email?: string) => {
      n += 1;
      return {
        id_str: String(7000 + n),
        name: `Bird ${n}`,
        screen_name: `bird${n}`,
        email,
        profile_image_url_https: `https://img.example/bird${n}.png`,
      };
    };

    before(async () => {
      peer = await startOAuth1Peer(CONSUMER);
      t = await buildTestApp(db, {
        SERVER_URL: SERVICE,
        REDIRECT_URL_SUCCESS: SUCCESS,
        PROVIDER_FAILURE_REDIRECT: FAILURE,
        TWITTER_ENABLED: true,
        TWITTER_CONSUMER_KEY: CONSUMER.consumerKey,
        TWITTER_CONSUMER_SECRET: CONSUMER.consumerSecret,
        TWITTER_REQUEST_TOKEN_URL: peer.requestTokenUrl,
        TWITTER_AUTHORIZATION_URL: peer.authorizationUrl,
        TWITTER_ACCESS_TOKEN_URL: peer.accessTokenUrl,
        TWITTER_USER_PROFILE_URL: peer.profileUrl,
        PROVIDER_TOKENS_STORED: true,
      });
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    it('signs in through the three signed steps and keeps the token and its secret', async () => {
      const p = person();
      peer.signInAs(p);
      const s = await sessionOf(t, refreshTokenOf(await new Browser(t.app, SERVICE).go(START)));
      assert.equal(s.user.display_name, p.name);
      assert.equal(s.user.avatar_url, p.profile_image_url_https);
      assert.deepEqual(await linksOf(t, s.user.id), [
        { auth_provider: 'twitter', auth_provider_unique_id: p.id_str },
      ]);
      assert.deepEqual(peer.refusals, [], 'every request was signed right');
      const tokens = await t.app.inject({
        method: 'GET',
        url: '/auth/providers/twitter/tokens',
        headers: { authorization: `Bearer ${s.jwt_token}` },
      });
      assert.equal(tokens.statusCode, 200, tokens.body);
      assert.ok(tokens.json().access_token && tokens.json().token_secret);
    });

    it('refuses a forged, reused or other-browser request token, and changes nothing', async () => {
      peer.signInAs(person());
      const b = new Browser(t.app, SERVICE);
      refreshTokenOf(await b.go(START));
      const used = b.visited.find((u) => u.startsWith(callback('twitter'))) as string;
      assertFailed(await b.go(used), 'PROVIDER_STATE_INVALID');
      assertFailed(
        await b.go(`${callback('twitter')}?oauth_token=forged&oauth_verifier=x`),
        'PROVIDER_STATE_INVALID',
      );
      // Another browser's sign-in, stopped before its callback, then opened by a victim.
      const start = await t.app.inject({ method: 'GET', url: '/auth/providers/twitter' });
      const approved = await new Browser(t.app, 'http://elsewhere.test').go(start.headers.location as string);
      const before = await snapshot(t);
      assertFailed(await b.go(approved.location as string), 'PROVIDER_STATE_INVALID');
      assert.equal(await snapshot(t), before);
    });

    it('does not link an existing account by the email Twitter shares', async () => {
      const owner = await signUp(t);
      peer.signInAs(person(owner.email));
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_EMAIL_NOT_VERIFIED');
      assert.deepEqual(await linksOf(t, owner.userId), []);
    });

    it('a person who refuses at Twitter lands on the failure URL', async () => {
      peer.denyNext();
      assertFailed(await new Browser(t.app, SERVICE).go(START), 'PROVIDER_DENIED');
    });
  });
}
