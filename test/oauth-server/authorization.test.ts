/**
 * Gatehouse as an OAuth 2.1 authorization server, driven by an independent client library
 * (oauth4webapi): metadata, the authorization code flow with PKCE and consent, RFC 9068 access tokens
 * bound to their resource, refresh rotation, revocation, introspection and userinfo; and the attacks the
 * protocol must refuse, each named after its threat.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as oauth from 'oauth4webapi';
import { generatePrivateKeyPem } from '../../src/auth/keys.ts';
import { configFrom } from '../../src/config.ts';
import { bearer, HS_KEY } from '../auth/helpers.ts';
import type { TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import {
  authorizeInBrowser,
  authorizeUrl,
  type Browser,
  buildOAuthApp,
  clientOptions,
  confidentialClient,
  discover,
  formFields,
  fullFlow,
  ISSUER,
  MCP,
  OTHER_MCP,
  postConsent,
  publicClient,
  REDIRECT,
  signedInBrowser,
} from './helpers.ts';

const errorOf = async (r: Response) => ((await r.json()) as { error: string }).error;

for (const kind of dbKinds()) {
  describe(`OAuth authorization server [${kind}]`, () => {
    let t: TestApp;
    let as: oauth.AuthorizationServer;
    let browser: Browser;
    let clientId: string;
    let rs: { id: string; secret: string };

    before(async () => {
      // The app's custom claims (JWT_CLAIMS_FUNCTION) reach graphql-scope tokens as they reach sign-ins.
      t = await buildOAuthApp(kind, { JWT_CLAIMS_FUNCTION: 'public.app_claims' });
      await t.ctx.db.exec(`
        CREATE FUNCTION public.app_claims(user_id uuid, claims jsonb) RETURNS jsonb LANGUAGE sql AS $$
          SELECT jsonb_build_object('x-hasura-org-id', 'org-' || left(user_id::text, 8)) $$;`);
      as = await discover(t);
      browser = await signedInBrowser(t);
      clientId = await publicClient(t);
      rs = await confidentialClient(t);
    });
    after(() => t.close());

    const introspect = async (token: string) => {
      const res = await oauth.introspectionRequest(
        as,
        { client_id: rs.id },
        oauth.ClientSecretBasic(rs.secret),
        token,
        clientOptions(t),
      );
      return oauth.processIntrospectionResponse(as, { client_id: rs.id }, res);
    };
    const tokens = async (b = browser, scope = 'openid email', resources = [MCP]) => {
      const { res, client } = await fullFlow(t, as, b, { clientId, scope, resources });
      return oauth.processAuthorizationCodeResponse(as, client, res);
    };
    const refresh = (token: string, extra: Record<string, string> = {}) =>
      oauth.refreshTokenGrantRequest(as, { client_id: clientId }, oauth.None(), token, {
        ...clientOptions(t),
        additionalParameters: extra,
      });

    it('publishes RFC 8414 metadata (and the same at openid-configuration)', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
      assert.equal(res.statusCode, 200);
      const doc = res.json();
      assert.equal(doc.issuer, ISSUER);
      assert.equal(doc.authorization_endpoint, `${ISSUER}/auth/oauth2/authorize`);
      assert.equal(doc.token_endpoint, `${ISSUER}/auth/oauth2/token`);
      assert.equal(doc.revocation_endpoint, `${ISSUER}/auth/oauth2/revoke`);
      assert.equal(doc.introspection_endpoint, `${ISSUER}/auth/oauth2/introspect`);
      assert.equal(doc.userinfo_endpoint, `${ISSUER}/auth/oauth2/userinfo`);
      assert.equal(doc.jwks_uri, `${ISSUER}/auth/jwks`);
      assert.equal(doc.registration_endpoint, undefined, 'registration is off by default');
      assert.deepEqual(doc.response_types_supported, ['code']);
      assert.deepEqual(doc.code_challenge_methods_supported, ['S256']);
      assert.deepEqual(doc.grant_types_supported, ['authorization_code', 'refresh_token']);
      assert.deepEqual(doc.token_endpoint_auth_methods_supported, [
        'none',
        'client_secret_basic',
        'client_secret_post',
      ]);
      assert.equal(doc.client_id_metadata_document_supported, true);
      assert.ok(doc.scopes_supported.includes('openid') && doc.scopes_supported.includes('graphql'));
      const oidc = await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' });
      assert.deepEqual(oidc.json(), doc);
    });

    it('issues an RFC 9068 access token bound to the resource, an ID token and a refresh token', async () => {
      const result = await tokens();
      const header = decodeProtectedHeader(result.access_token);
      assert.equal(header.typ, 'at+jwt');
      const claims = decodeJwt(result.access_token);
      assert.equal(claims.iss, ISSUER);
      assert.equal(claims.sub, browser.userId);
      assert.equal(claims.aud, MCP);
      assert.equal(claims.client_id, clientId);
      assert.equal(claims.scope, 'openid email');
      assert.ok(typeof claims.jti === 'string' && typeof claims.sid === 'string');
      assert.ok(typeof claims.auth_time === 'number');
      assert.equal(claims['https://hasura.io/jwt/claims'], undefined, 'no Hasura claims without graphql');
      assert.ok(result.refresh_token);
      const id = oauth.getValidatedIdTokenClaims(result);
      assert.equal(id?.sub, browser.userId);
      assert.equal(id?.email, browser.email);
      // The resource server's view: valid for MCP (signature from /auth/jwks, audience)…
      const at = (aud: string) =>
        oauth.validateJwtAccessToken(
          as,
          new Request(aud, { headers: { authorization: `Bearer ${result.access_token}` } }),
          aud,
          clientOptions(t),
        );
      const seen = await at(MCP);
      assert.equal(seen.sub, browser.userId);
      // …and refused by a server for another resource.
      await assert.rejects(at(OTHER_MCP), /aud/i);
      assert.equal((await introspect(result.access_token)).active, true);
    });

    it('refuses the access token at Gatehouse’s own routes (it is for its resource only)', async () => {
      const result = await tokens();
      const res = await t.app.inject({
        method: 'GET',
        url: '/auth/sessions',
        headers: bearer(result.access_token),
      });
      assert.equal(res.statusCode, 401);
      assert.match(res.json().message, /OAuth access token/);
    });

    it('adds the person’s own Hasura claims with the graphql scope, the app’s custom claims included', async () => {
      const result = await tokens(browser, 'graphql');
      const claims = decodeJwt(result.access_token)['https://hasura.io/jwt/claims'] as Record<
        string,
        unknown
      >;
      assert.equal(claims['x-hasura-user-id'], browser.userId);
      assert.deepEqual(claims['x-hasura-allowed-roles'], ['user']);
      assert.equal(claims['x-hasura-default-role'], 'user');
      assert.equal(claims['x-hasura-org-id'], `org-${browser.userId.slice(0, 8)}`, "the app's claims too");
    });

    it('answers userinfo for a token without a resource (the issuer’s own APIs), not for an MCP token', async () => {
      const own = await tokens(browser, 'openid email profile', []);
      assert.equal(decodeJwt(own.access_token).aud, ISSUER);
      const res = await oauth.userInfoRequest(
        as,
        { client_id: clientId },
        own.access_token,
        clientOptions(t),
      );
      const info = await oauth.processUserInfoResponse(as, { client_id: clientId }, browser.userId, res);
      assert.equal(info.email, browser.email);
      const mcp = await tokens();
      const refused = await t.app.inject({
        method: 'GET',
        url: '/auth/oauth2/userinfo',
        headers: bearer(mcp.access_token),
      });
      assert.equal(refused.statusCode, 401);
    });

    it('remembers consent: the same request later goes straight back to the client', async () => {
      await tokens();
      const res = await t.app.inject({
        method: 'GET',
        url: authorizeUrl({
          clientId,
          scope: 'openid email',
          resources: [MCP],
          challenge: 'a'.repeat(43),
          method: 'S256',
          state: 's',
        }),
        headers: { cookie: browser.cookie },
      });
      assert.equal(res.statusCode, 302);
      const back = new URL(res.headers.location as string);
      assert.equal(back.origin + back.pathname, REDIRECT);
      assert.ok(back.searchParams.get('code'));
      assert.equal(back.searchParams.get('state'), 's');
      assert.equal(back.searchParams.get('iss'), ISSUER);
    });

    it('sends a person without a session to sign in, with the way back', async () => {
      const url = authorizeUrl({ clientId, resources: [MCP], challenge: 'a'.repeat(43), method: 'S256' });
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 302);
      assert.equal(res.headers.location, `/console/?return_to=${encodeURIComponent(url)}`);
    });

    it('rotates refresh tokens and may narrow the scope, never widen it', async () => {
      const first = await tokens(browser, 'openid email');
      const narrowed = await oauth.processRefreshTokenResponse(
        as,
        { client_id: clientId },
        await refresh(first.refresh_token as string, { scope: 'email' }),
      );
      assert.equal(decodeJwt(narrowed.access_token).scope, 'email');
      assert.notEqual(narrowed.refresh_token, first.refresh_token);
      const wider = await refresh(narrowed.refresh_token as string, { scope: 'openid email graphql' });
      assert.equal(wider.status, 400);
      assert.equal(await errorOf(wider), 'invalid_scope');
      const otherResource = await refresh(narrowed.refresh_token as string, { resource: OTHER_MCP });
      assert.equal(await errorOf(otherResource), 'invalid_target');
    });

    it('ends the whole grant when a rotated refresh token is replayed (reuse detection)', async () => {
      const first = await tokens();
      const second = await oauth.processRefreshTokenResponse(
        as,
        { client_id: clientId },
        await refresh(first.refresh_token as string),
      );
      const replay = await refresh(first.refresh_token as string);
      assert.equal(replay.status, 400);
      assert.equal(await errorOf(replay), 'invalid_grant');
      assert.equal((await introspect(second.access_token)).active, false);
      assert.equal((await refresh(second.refresh_token as string)).status, 400);
    });

    it('revokes (RFC 7009): the refresh token and the access tokens of its grant are dead at once', async () => {
      const result = await tokens();
      const res = await oauth.revocationRequest(
        as,
        { client_id: clientId },
        oauth.None(),
        result.refresh_token as string,
        clientOptions(t),
      );
      await oauth.processRevocationResponse(res);
      assert.equal((await introspect(result.access_token)).active, false);
      assert.equal((await refresh(result.refresh_token as string)).status, 400);
    });

    it('makes every token of a signed-out session inactive at once', async () => {
      const b = await signedInBrowser(t);
      const result = await tokens(b);
      assert.equal((await introspect(result.access_token)).active, true);
      const out = await t.app.inject({
        method: 'POST',
        url: '/auth/logout',
        headers: { cookie: b.cookie, origin: ISSUER },
      });
      assert.ok(out.statusCode < 300, out.body);
      assert.equal((await introspect(result.access_token)).active, false);
      assert.equal((await refresh(result.refresh_token as string)).status, 400);
    });

    it('lists the grants a person gave and withdraws one: its tokens stop working at once', async () => {
      const b = await signedInBrowser(t);
      const result = await tokens(b);
      const jwt = (
        await t.app.inject({
          method: 'POST',
          url: '/auth/login',
          payload: { email: b.email, password: b.password, cookie: false },
        })
      ).json().jwt_token;
      const listed = await t.app.inject({ method: 'GET', url: '/auth/oauth2/grants', headers: bearer(jwt) });
      assert.equal(listed.statusCode, 200, listed.body);
      const grants = listed.json() as {
        client_id: string;
        scopes: string[];
        resources: string[];
        last_used_at: string;
      }[];
      assert.equal(grants.length, 1);
      assert.equal(grants[0]?.client_id, clientId);
      assert.deepEqual(grants[0]?.resources, [MCP]);
      assert.ok(grants[0]?.last_used_at);
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/auth/oauth2/grants/${encodeURIComponent(clientId)}`,
        headers: bearer(jwt),
      });
      assert.equal(del.statusCode, 204);
      assert.equal((await introspect(result.access_token)).active, false);
      assert.equal((await refresh(result.refresh_token as string)).status, 400);
      const feed = await t.app.inject({ method: 'GET', url: '/auth/security-events', headers: bearer(jwt) });
      const events = feed.json() as { type: string; details: Record<string, unknown> }[];
      const created = events.find((e) => e.type === 'oauth_grant_created');
      const revoked = events.find((e) => e.type === 'oauth_grant_revoked');
      assert.deepEqual(created?.details, {
        client_id: clientId,
        client_name: 'Test Agent',
        scopes: ['openid', 'email'],
        resources: [MCP],
      });
      assert.deepEqual(revoked?.details, { client_id: clientId, by: 'owner' });
      const again = await t.app.inject({
        method: 'DELETE',
        url: `/auth/oauth2/grants/${encodeURIComponent(clientId)}`,
        headers: bearer(jwt),
      });
      assert.equal(again.statusCode, 404);
      assert.equal(again.json().code, 'OAUTH_GRANT_NOT_FOUND');
    });

    it('publishes the signing key in /auth/jwks', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/auth/jwks' });
      const result = await tokens();
      const kid = decodeProtectedHeader(result.access_token).kid;
      assert.ok((res.json().keys as { kid: string }[]).some((k) => k.kid === kid));
    });

    describe('refusals', () => {
      const callback = (res: { statusCode: number; headers: Record<string, unknown> }) => {
        assert.ok(res.statusCode === 302 || res.statusCode === 303, `a redirect, got ${res.statusCode}`);
        const u = new URL(res.headers.location as string);
        assert.equal(u.origin + u.pathname, REDIRECT);
        return u.searchParams;
      };
      const get = (url: string, cookie = browser.cookie) =>
        t.app.inject({ method: 'GET', url, headers: { cookie } });

      it('refuses an authorization request without PKCE', async () => {
        const p = callback(await get(authorizeUrl({ clientId, resources: [MCP], state: 'x' })));
        assert.equal(p.get('error'), 'invalid_request');
        assert.equal(p.get('state'), 'x');
        assert.equal(p.get('code'), null);
      });

      it('refuses PKCE with the plain method', async () => {
        const p = callback(
          await get(authorizeUrl({ clientId, resources: [MCP], challenge: 'a'.repeat(43), method: 'plain' })),
        );
        assert.equal(p.get('error'), 'invalid_request');
      });

      it('refuses a code with a wrong verifier (a stolen code is useless)', async () => {
        const { params } = await fullFlow(t, as, browser, { clientId }).then(async (f) => {
          // fullFlow exchanged with the right verifier; start another flow and use a wrong one.
          await f.res.body?.cancel();
          return f;
        });
        void params;
        const verifier = oauth.generateRandomCodeVerifier();
        const back = await authorizeInBrowser(t, browser, {
          clientId,
          scope: 'openid email',
          resources: [MCP],
          challenge: await oauth.calculatePKCECodeChallenge(verifier),
          method: 'S256',
          state: 'w',
        });
        const res = await oauth.authorizationCodeGrantRequest(
          as,
          { client_id: clientId },
          oauth.None(),
          oauth.validateAuthResponse(as, { client_id: clientId }, back, 'w'),
          REDIRECT,
          oauth.generateRandomCodeVerifier(),
          clientOptions(t),
        );
        assert.equal(res.status, 400);
        assert.deepEqual(Object.keys((await res.json()) as object).sort(), ['error', 'error_description']);
      });

      it('refuses a code used twice, and the tokens of its first use die with it', async () => {
        const { res, client, params, verifier } = await fullFlow(t, as, browser, { clientId });
        const first = await oauth.processAuthorizationCodeResponse(as, client, res);
        assert.equal((await introspect(first.access_token)).active, true);
        const again = await oauth.authorizationCodeGrantRequest(
          as,
          client,
          oauth.None(),
          params,
          REDIRECT,
          verifier,
          clientOptions(t),
        );
        assert.equal(again.status, 400);
        assert.equal(await errorOf(again), 'invalid_grant');
        assert.equal((await introspect(first.access_token)).active, false);
        assert.equal((await refresh(first.refresh_token as string)).status, 400);
      });

      it('shows a page, never a redirect, for a redirect URI the client did not register (no open redirect)', async () => {
        const res = await get(
          authorizeUrl({
            clientId,
            redirectUri: 'https://evil.example/cb',
            resources: [MCP],
            challenge: 'a'.repeat(43),
            method: 'S256',
          }),
        );
        assert.equal(res.statusCode, 400);
        assert.equal(res.headers.location, undefined);
        assert.match(String(res.headers['content-type']), /text\/html/);
        assert.match(res.body, /redirect_uri is not one the client registered/);
        const unknown = await get(
          authorizeUrl({ clientId: 'nobody', resources: [MCP], challenge: 'a'.repeat(43), method: 'S256' }),
        );
        assert.equal(unknown.statusCode, 400);
        assert.equal(unknown.headers.location, undefined);
        const json = await t.app.inject({
          method: 'GET',
          url: authorizeUrl({ clientId: 'nobody', challenge: 'a'.repeat(43), method: 'S256' }),
          headers: { accept: 'application/json' },
        });
        assert.equal(json.json().code, 'OAUTH_REQUEST_INVALID');
      });

      it('accepts any port on a loopback redirect URI (RFC 8252), not another path', async () => {
        const ok = await get(
          authorizeUrl({
            clientId,
            redirectUri: 'http://127.0.0.1:5555/callback',
            resources: [MCP],
            challenge: 'a'.repeat(43),
            method: 'S256',
          }),
        );
        // A consent page, or (consent already given) straight back to the port asked for.
        assert.ok(
          ok.statusCode === 200 || String(ok.headers.location).startsWith('http://127.0.0.1:5555/callback?'),
        );
        const bad = await get(
          authorizeUrl({
            clientId,
            redirectUri: 'http://127.0.0.1:5555/other',
            resources: [MCP],
            challenge: 'a'.repeat(43),
            method: 'S256',
          }),
        );
        assert.equal(bad.statusCode, 400);
      });

      it('refuses a resource the server does not issue tokens for', async () => {
        const p = callback(
          await get(
            authorizeUrl({
              clientId,
              resources: ['https://attacker.example/mcp'],
              challenge: 'a'.repeat(43),
              method: 'S256',
            }),
          ),
        );
        assert.equal(p.get('error'), 'invalid_target');
        const fragment = callback(
          await get(
            authorizeUrl({ clientId, resources: [`${MCP}#x`], challenge: 'a'.repeat(43), method: 'S256' }),
          ),
        );
        assert.equal(fragment.get('error'), 'invalid_target');
      });

      it('refuses an exchange that asks for a resource beyond the code’s', async () => {
        const verifier = oauth.generateRandomCodeVerifier();
        const back = await authorizeInBrowser(t, browser, {
          clientId,
          scope: 'openid email',
          resources: [MCP],
          state: 'r',
          challenge: await oauth.calculatePKCECodeChallenge(verifier),
          method: 'S256',
        });
        const res = await oauth.authorizationCodeGrantRequest(
          as,
          { client_id: clientId },
          oauth.None(),
          oauth.validateAuthResponse(as, { client_id: clientId }, back, 'r'),
          REDIRECT,
          verifier,
          { ...clientOptions(t), additionalParameters: [['resource', OTHER_MCP]] },
        );
        assert.equal(await errorOf(res), 'invalid_target');
      });

      it('refuses a consent post without its form token, or from another session, or from another site', async () => {
        const url = authorizeUrl({
          clientId,
          scope: 'openid profile',
          resources: [OTHER_MCP],
          challenge: 'b'.repeat(43),
          method: 'S256',
          state: 'c',
        });
        const page = await get(url);
        assert.equal(page.statusCode, 200, page.body);
        const fields = formFields(page.body);
        const withoutToken = await postConsent(
          t,
          browser.cookie,
          fields.filter(([k]) => k !== 'csrf_token'),
        );
        assert.equal(withoutToken.statusCode, 403);
        assert.equal(withoutToken.headers.location, undefined);
        const other = await signedInBrowser(t);
        const otherSession = await postConsent(t, other.cookie, fields);
        assert.equal(otherSession.statusCode, 403);
        assert.equal(otherSession.headers.location, undefined);
        const crossSite = await postConsent(t, browser.cookie, fields, 'allow', {
          origin: 'https://evil.example',
        });
        assert.equal(crossSite.statusCode, 403);
        const tampered = await postConsent(
          t,
          browser.cookie,
          fields.map(([k, v]) => [k, k === 'scope' ? 'openid profile graphql' : v]),
        );
        assert.equal(tampered.statusCode, 403);
        // The genuine post still works, once.
        const denied = await postConsent(t, browser.cookie, fields, 'deny');
        const p = callback(denied);
        assert.equal(p.get('error'), 'access_denied');
        assert.equal(p.get('state'), 'c');
      });

      it('answers RFC 6749 errors at the token endpoint for bad input, never a 500', async () => {
        const post = (payload: string, headers: Record<string, string> = {}) =>
          t.app.inject({
            method: 'POST',
            url: '/auth/oauth2/token',
            headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
            payload,
          });
        for (const [payload, error] of [
          ['grant_type=password&client_id=' + clientId, 'unsupported_grant_type'],
          ['client_id=' + clientId, 'invalid_request'],
          ['grant_type=authorization_code&client_id=' + clientId, 'invalid_request'],
          ['grant_type=authorization_code&code=nope&client_id=' + clientId, 'invalid_grant'],
          ['grant_type=authorization_code&code=x', 'invalid_client'],
          ['grant_type=authorization_code&code=x&client_id=nobody', 'invalid_client'],
          [`grant_type=authorization_code&code=x&client_id=${rs.id}&client_secret=wrong`, 'invalid_client'],
          [`grant_type=refresh_token&client_id=${clientId}&refresh_token=nope`, 'invalid_grant'],
          [`grant_type=authorization_code&grant_type=refresh_token&client_id=${clientId}`, 'invalid_request'],
        ] as const) {
          const res = await post(payload);
          assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${payload}: ${res.statusCode}`);
          assert.equal(res.json().error, error, payload);
        }
        const json = await post('{}', { 'content-type': 'application/json' });
        assert.equal(json.statusCode, 400);
        assert.equal(json.json().error, 'invalid_request');
        const basic = await post('grant_type=authorization_code&code=x', { authorization: 'Basic !!!' });
        assert.equal(basic.json().error, 'invalid_client');
      });

      it('refuses introspection without a confidential client’s credentials', async () => {
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/oauth2/introspect',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `token=x&client_id=${clientId}`,
        });
        assert.equal(res.statusCode, 401);
        assert.equal(res.json().error, 'invalid_client');
      });
    });
  });
}

describe('OAuth server settings', () => {
  it('refuses to start with an HS* JWT_ALGORITHM and no asymmetric OAUTH_SERVER_KEY', () => {
    assert.throws(
      () => configFrom({ OAUTH_SERVER_ENABLED: true, JWT_ALGORITHM: 'HS256', JWT_KEY: 'x'.repeat(40) }),
      /OAUTH_SERVER_KEY/,
    );
  });

  it('refuses to start in production with the console (the operator’s) as the sign-in page', () => {
    const production = {
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://x@db/x',
      COOKIE_SECRET: 'c'.repeat(40),
      JWT_KEY: 'k'.repeat(40),
      JWT_ALGORITHM: 'HS256',
      MFA_ENABLED: false,
      OAUTH_SERVER_ENABLED: true,
      OAUTH_SERVER_KEY: generatePrivateKeyPem('ES256'),
      OAUTH_SERVER_ALGORITHM: 'ES256',
    } as const;
    assert.throws(() => configFrom(production), /OAUTH_LOGIN_URL must name your app's sign-in page/);
    assert.equal(
      configFrom({ ...production, OAUTH_LOGIN_URL: 'https://app.example.com/sign-in' }).OAUTH_SERVER_ENABLED,
      true,
    );
  });
});

describe('OAuth server with an HS256 JWT_ALGORITHM and its own key (OAUTH_SERVER_KEY)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildOAuthApp('pglite', {
      JWT_ALGORITHM: 'HS256',
      JWT_KEY: HS_KEY,
      OAUTH_SERVER_KEY: generatePrivateKeyPem('EdDSA'),
      OAUTH_SERVER_ALGORITHM: 'EdDSA',
    });
  });
  after(() => t.close());

  it('signs with that key and publishes only its public half in /auth/jwks (never the shared secret)', async () => {
    const jwks = (await t.app.inject({ method: 'GET', url: '/auth/jwks' })).json() as {
      keys: { kid: string; alg: string; kty: string; d?: string; k?: string }[];
    };
    assert.equal(jwks.keys.length, 1);
    assert.equal(jwks.keys[0]?.alg, 'EdDSA');
    assert.equal(jwks.keys[0]?.d, undefined);
    assert.equal(jwks.keys[0]?.k, undefined);
    const as = await discover(t);
    assert.deepEqual(as.id_token_signing_alg_values_supported, ['EdDSA']);
    const b = await signedInBrowser(t);
    const clientId = await publicClient(t);
    const { res, client } = await fullFlow(t, as, b, { clientId });
    const result = await oauth.processAuthorizationCodeResponse(as, client, res);
    assert.equal(decodeProtectedHeader(result.access_token).kid, jwks.keys[0]?.kid);
    const seen = await oauth.validateJwtAccessToken(
      as,
      new Request(MCP, { headers: { authorization: `Bearer ${result.access_token}` } }),
      MCP,
      clientOptions(t),
    );
    assert.equal(seen.sub, b.userId);
  });
});
