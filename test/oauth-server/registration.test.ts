/**
 * Dynamic client registration (RFC 7591): off by default (404, not in the metadata); when on, a public
 * client registers and signs a person in, a confidential one gets a secret it must then present, and
 * bad metadata gets RFC 7591's errors in RFC 6749's body.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as oauth from 'oauth4webapi';
import type { TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { buildOAuthApp, clientOptions, discover, fullFlow, REDIRECT, signedInBrowser } from './helpers.ts';

const register = (t: TestApp, payload: unknown) =>
  t.app.inject({ method: 'POST', url: '/auth/oauth2/register', payload: payload as object });

for (const kind of dbKinds()) {
  describe(`dynamic client registration [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildOAuthApp(kind, { OAUTH_DYNAMIC_REGISTRATION: true });
    });
    after(() => t.close());

    it('registers a public client that then signs a person in', async () => {
      const as = await discover(t);
      assert.equal(as.registration_endpoint, 'http://gatehouse.test/auth/oauth2/register');
      const res = await register(t, {
        client_name: 'Claude-like Agent',
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
      });
      assert.equal(res.statusCode, 201, res.body);
      const body = res.json();
      assert.match(body.client_id, /^gh_/);
      assert.equal(body.client_secret, undefined);
      assert.deepEqual(body.redirect_uris, [REDIRECT]);
      const browser = await signedInBrowser(t);
      const { res: tokenRes, client } = await fullFlow(t, as, browser, { clientId: body.client_id });
      const tokens = await oauth.processAuthorizationCodeResponse(as, client, tokenRes);
      assert.ok(tokens.access_token);
    });

    it('gives a confidential client a secret, which it must present', async () => {
      const as = await discover(t);
      const res = await register(t, { client_name: 'Server App', redirect_uris: [REDIRECT] });
      assert.equal(res.statusCode, 201, res.body);
      const { client_id, client_secret, token_endpoint_auth_method } = res.json();
      assert.equal(token_endpoint_auth_method, 'client_secret_basic');
      assert.ok(typeof client_secret === 'string' && client_secret.length >= 40);
      const browser = await signedInBrowser(t);
      const flow = await fullFlow(t, as, browser, {
        clientId: client_id,
        clientAuth: oauth.ClientSecretPost(client_secret),
      });
      const tokens = await oauth.processAuthorizationCodeResponse(as, flow.client, flow.res);
      const introspected = await oauth.processIntrospectionResponse(
        as,
        flow.client,
        await oauth.introspectionRequest(
          as,
          flow.client,
          oauth.ClientSecretBasic(client_secret),
          tokens.access_token,
          clientOptions(t),
        ),
      );
      assert.equal(introspected.active, true);
      const without = await fullFlow(t, as, browser, { clientId: client_id });
      assert.equal(without.res.status, 401);
      assert.equal(((await without.res.json()) as { error: string }).error, 'invalid_client');
    });

    it('refuses bad metadata with RFC 7591 errors, never a 500', async () => {
      for (const [payload, error] of [
        [{}, 'invalid_redirect_uri'],
        [{ redirect_uris: ['not a url'] }, 'invalid_redirect_uri'],
        [{ redirect_uris: ['https://app.example/cb#frag'] }, 'invalid_redirect_uri'],
        [{ redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
        [{ redirect_uris: 'https://app.example/cb' }, 'invalid_client_metadata'],
        [
          { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'private_key_jwt' },
          'invalid_client_metadata',
        ],
        [{ redirect_uris: [REDIRECT], grant_types: ['password'] }, 'invalid_client_metadata'],
        [{ redirect_uris: [REDIRECT], response_types: ['token'] }, 'invalid_client_metadata'],
        [{ redirect_uris: [REDIRECT], client_name: 42 }, 'invalid_client_metadata'],
        [[1, 2], 'invalid_request'],
      ] as const) {
        const res = await register(t, payload);
        assert.equal(res.statusCode, 400, JSON.stringify(payload));
        assert.equal(res.json().error, error, JSON.stringify(payload));
        assert.equal(typeof res.json().error_description, 'string');
      }
      const garbage = await t.app.inject({
        method: 'POST',
        url: '/auth/oauth2/register',
        headers: { 'content-type': 'application/json' },
        payload: '{not json',
      });
      assert.equal(garbage.statusCode, 400);
      assert.equal(garbage.json().error, 'invalid_request');
    });
  });
}

describe('dynamic client registration switched off (the default)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildOAuthApp('pglite');
  });
  after(() => t.close());

  it('answers 404 and is not in the metadata', async () => {
    const res = await register(t, { redirect_uris: [REDIRECT] });
    assert.equal(res.statusCode, 404);
    assert.equal((await discover(t)).registration_endpoint, undefined);
  });
});
