/**
 * Sign-in with the OAuth 2.0 providers reached through endpoint settings (GitHub through HBP's
 * GITHUB_*_URL, as for GitHub Enterprise; Facebook, Windows Live and Spotify through theirs), against a
 * small authorization server in the test process that checks client authentication, redirect URIs,
 * single-use codes and PKCE.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newEmail, signUp, snapshot } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { dbKinds } from '../helpers/db.ts';
import { type OAuth2Peer, type PeerUser, startOAuth2Peer } from '../helpers/oauth2-peer.ts';
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

const SECRET = 'provider-client-secret-0123456789';

/** Each provider's profile document, in its own shape, and how its client authenticates. */
const KINDS = {
  github: {
    clientAuth: 'post' as const,
    githubStyle: true,
    // The profile shows the public address, which says nothing of verification.
    profile: (u: PeerUser) => ({
      id: Number(u.id),
      login: u.login,
      name: u.name,
      email: u.email,
      avatar_url: u.avatar,
    }),
    emails: (u: PeerUser) => [
      { email: `other-${u.email}`, primary: false, verified: false },
      { email: u.email, primary: true, verified: u.verified },
    ],
  },
  facebook: {
    clientAuth: 'post' as const,
    profile: (u: PeerUser) => ({
      id: u.id,
      name: u.name,
      email: u.email,
      picture: { data: { url: u.avatar } },
    }),
  },
  windowslive: {
    clientAuth: 'post' as const,
    profile: (u: PeerUser) => ({ id: u.id, displayName: u.name, mail: u.email, userPrincipalName: u.email }),
  },
  spotify: {
    clientAuth: 'basic' as const,
    profile: (u: PeerUser) => ({
      id: u.id,
      display_name: u.name,
      email: u.email,
      images: [{ url: u.avatar }],
    }),
  },
};
type Kind = keyof typeof KINDS;
const SETTING: Record<Kind, string> = {
  github: 'GITHUB',
  facebook: 'FACEBOOK',
  windowslive: 'WINDOWS_LIVE',
  spotify: 'SPOTIFY',
};

for (const db of dbKinds()) {
  describe(`OAuth 2.0 providers [${db}]`, () => {
    const peers = {} as Record<Kind, OAuth2Peer>;
    let t: TestApp;
    let n = 0;
    const user = (extra: Partial<PeerUser> = {}): PeerUser => {
      n += 1;
      return {
        id: String(1000 + n),
        login: `octo${n}`,
        name: `Octo ${n}`,
        email: newEmail('oauth2'),
        verified: true,
        avatar: `https://img.example/${n}.png`,
        ...extra,
      };
    };
    const go = (provider: Kind, query = '') =>
      new Browser(t.app, SERVICE).go(`${SERVICE}/auth/providers/${provider}${query}`);

    before(async () => {
      const settings: Record<string, unknown> = {};
      for (const kind of Object.keys(KINDS) as Kind[]) {
        peers[kind] = await startOAuth2Peer({
          clientId: `${kind}-client`,
          clientSecret: SECRET,
          redirectUri: callback(kind),
          requirePkce: true,
          ...KINDS[kind],
        });
        const s = SETTING[kind];
        Object.assign(settings, {
          [`${s}_ENABLED`]: true,
          [`${s}_CLIENT_ID`]: `${kind}-client`,
          [`${s}_CLIENT_SECRET`]: SECRET,
          [`${s}_AUTHORIZATION_URL`]: peers[kind].authorizationUrl,
          [`${s}_TOKEN_URL`]: peers[kind].tokenUrl,
          [`${s}_USER_PROFILE_URL`]: peers[kind].profileUrl,
        });
      }
      t = await buildTestApp(db, {
        SERVER_URL: SERVICE,
        PROVIDER_SUCCESS_REDIRECT: SUCCESS,
        REDIRECT_URL_SUCCESS: 'http://app.test/not-for-providers',
        REDIRECT_URL_ERROR: FAILURE,
        ...settings,
      });
    });
    after(async () => {
      await t?.close();
      for (const p of Object.values(peers)) await p.close();
    });

    for (const kind of Object.keys(KINDS) as Kind[]) {
      it(`${kind}: signs in a new person through the configured endpoints (PROVIDER_SUCCESS_REDIRECT, PKCE)`, async () => {
        const u = user();
        peers[kind].signInAs(u);
        const s = await sessionOf(t, refreshTokenOf(await go(kind)));
        assert.equal(s.user.display_name, u.name);
        assert.deepEqual(
          (await linksOf(t, s.user.id)).map((l) => [l.auth_provider, l.auth_provider_unique_id]),
          [[kind, u.id]],
        );
        // Only GitHub vouches for the address; the others' addresses are not put on the account.
        assert.equal(s.user.email, kind === 'github' ? u.email : null);
        if (kind !== 'windowslive') assert.equal(s.user.avatar_url, u.avatar);
        const auth = peers[kind].authorizations.at(-1) as URL;
        assert.equal(auth.searchParams.get('code_challenge_method'), 'S256');
        const tokenRequest = peers[kind].tokenRequests.at(-1);
        assert.equal(tokenRequest?.status, 200);
        assert.equal(tokenRequest?.basic, KINDS[kind].clientAuth === 'basic');
        assert.ok(tokenRequest?.fields.code_verifier);
      });
    }

    it('github: a verified primary email links the existing account; an unverified one is refused and nothing changes', async () => {
      const owner = await provenAccount(t, newEmail('github-owner'));
      peers.github.signInAs(user({ email: owner.email, verified: false }));
      const before = await snapshot(t);
      assertFailed(await go('github'), 'PROVIDER_EMAIL_NOT_VERIFIED');
      assert.equal(await snapshot(t), before);
      const u = user({ email: owner.email, verified: true });
      peers.github.signInAs(u);
      const s = await sessionOf(t, refreshTokenOf(await go('github')));
      assert.equal(s.user.id, owner.userId);
      assert.deepEqual(await linksOf(t, owner.userId), [
        { auth_provider: 'github', auth_provider_unique_id: u.id },
      ]);
    });

    it('facebook: an address Facebook does not vouch for never links an existing account', async () => {
      const owner = await signUp(t);
      peers.facebook.signInAs(user({ email: owner.email }));
      assertFailed(await go('facebook'), 'PROVIDER_EMAIL_NOT_VERIFIED');
      assert.deepEqual(await linksOf(t, owner.userId), []);
    });

    it('a person who cancels at the provider lands on REDIRECT_URL_ERROR with PROVIDER_DENIED', async () => {
      peers.spotify.denyNext();
      assertFailed(await go('spotify'), 'PROVIDER_DENIED');
    });

    it('a code the provider refuses (replayed with a forged state binding) signs no one in', async () => {
      const u = user();
      peers.github.signInAs(u);
      const b = new Browser(t.app, SERVICE);
      refreshTokenOf(await b.go(`${SERVICE}/auth/providers/github`));
      const cb = b.visited.find((v) => v.startsWith(callback('github'))) as string;
      // The same callback again: the state is used up before the code is even looked at.
      const requests = peers.github.tokenRequests.length;
      assertFailed(await b.go(cb), 'PROVIDER_STATE_INVALID');
      assert.equal(peers.github.tokenRequests.length, requests, 'the code was not sent again');
    });
  });
}

describe('OAuth 2.0 provider settings', () => {
  it('a provider is off until enabled, and HBP spellings enable it (WINDOWSLIVE_*, SPOTIFY_ENABLE)', async () => {
    const { loadConfig } = await import('../../src/config.ts');
    const c = loadConfig({
      WINDOWSLIVE_ENABLED: 'true',
      WINDOWSLIVE_CLIENT_ID: 'id',
      WINDOWSLIVE_CLIENT_SECRET: 's',
      SPOTIFY_ENABLE: 'true',
      SPOTIFY_CLIENT_ID: 'id',
      SPOTIFY_CLIENT_SECRET: 's',
    });
    assert.equal(c.WINDOWS_LIVE_ENABLED, true);
    assert.equal(c.WINDOWS_LIVE_CLIENT_ID, 'id');
    assert.equal(c.SPOTIFY_ENABLED, true);
    assert.equal(c.GITHUB_ENABLED, false);
    assert.throws(
      () => loadConfig({ GITHUB_ENABLED: 'true' }),
      /GITHUB_CLIENT_ID is required when GITHUB_ENABLED is true/,
    );
  });

  it('refuses http provider endpoints in production', async () => {
    const { loadConfig } = await import('../../src/config.ts');
    assert.throws(
      () =>
        loadConfig({
          NODE_ENV: 'production',
          DATABASE_URL: 'postgres://x@db/app',
          COOKIE_SECRET: 'c'.repeat(32),
          MFA_ENCRYPTION_KEY: 'm'.repeat(32),
          GITHUB_ENABLED: 'true',
          GITHUB_CLIENT_ID: 'id',
          GITHUB_CLIENT_SECRET: 's',
          GITHUB_TOKEN_URL: 'http://ghe.internal/login/oauth/access_token',
        }),
      /GITHUB_TOKEN_URL must be an https URL in production/,
    );
  });
});
