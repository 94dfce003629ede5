/**
 * `gatehouse oauth-clients create|list|delete` against the service's database, checked through the
 * service's own OAuth routes: a client the operator created signs a person in; deleting it ends its
 * tokens at once and tells the person in their security feed.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../helpers/app.ts';
import { type CliInstallation, cliInstallation } from '../helpers/cli.ts';
import { dbKinds } from '../helpers/db.ts';
import { authorizeUrl, formFields, MCP, postConsent, REDIRECT } from '../oauth-server/helpers.ts';

type App = Parameters<Parameters<CliInstallation['withService']>[0]>[1];
const SERVER = 'http://localhost:3000';

/** A person signs in, allows `clientId`, and the code is exchanged: the token response and a bearer JWT. */
async function tokensFor(app: App, clientId: string) {
  const t = { app } as unknown as TestApp;
  const email = `cli-oauth-${Date.now()}-${Math.random()}@example.com`;
  const creds = { email, password: 'correct horse battery', cookie: true };
  assert.equal(
    (await app.inject({ method: 'POST', url: '/auth/register', payload: { ...creds, cookie: false } }))
      .statusCode,
    200,
  );
  const login = await app.inject({ method: 'POST', url: '/auth/login', payload: creds });
  const cookie = (login.cookies as { name: string; value: string }[])
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');
  const jwt = login.json().jwt_token as string;
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const page = await app.inject({
    method: 'GET',
    url: authorizeUrl({ clientId, scope: 'openid', resources: [MCP], challenge, method: 'S256' }),
    headers: { cookie },
  });
  assert.equal(page.statusCode, 200, page.body);
  assert.match(page.body, /Claude Desktop/);
  const back = await postConsent(t, cookie, formFields(page.body), 'allow', { origin: SERVER });
  assert.equal(back.statusCode, 303, back.body);
  const code = new URL(back.headers.location as string).searchParams.get('code') as string;
  const res = await app.inject({
    method: 'POST',
    url: '/auth/oauth2/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: clientId,
    }).toString(),
  });
  assert.equal(res.statusCode, 200, res.body);
  return { tokens: res.json() as { access_token: string; refresh_token: string }, jwt };
}

for (const kind of dbKinds()) {
  describe(`gatehouse oauth-clients [${kind}]`, () => {
    let g: CliInstallation;
    before(async () => {
      g = await cliInstallation(kind, {
        OAUTH_SERVER_ENABLED: 'true',
        JWT_ALGORITHM: 'ES256',
        OAUTH_RESOURCES: MCP,
        RATE_LIMIT_ENABLED: 'false',
      });
    });
    after(() => g?.close());

    it('creates public and confidential clients, lists them without secrets, and deletes one: its tokens die at once', async () => {
      const pub = await g.bin(
        '',
        'oauth-clients',
        'create',
        '--name',
        'Claude Desktop',
        '--redirect-uri',
        REDIRECT,
        '--json',
      );
      assert.equal(pub.code, 0, pub.err);
      const { client_id: publicId, client_secret: none } = JSON.parse(pub.out);
      assert.match(publicId, /^gh_/);
      assert.equal(none, undefined);
      const conf = await g.gatehouse(
        'oauth-clients',
        'create',
        '--name',
        'Resource server',
        `--redirect-uri=${REDIRECT}`,
        '--confidential',
      );
      assert.equal(conf.code, 0, conf.err);
      const confId = /client_id: (\S+)/.exec(conf.out)?.[1] as string;
      const secret = /client_secret: (\S+)/.exec(conf.out)?.[1] as string;
      assert.ok(confId && secret);
      const listed = await g.gatehouse('oauth-clients', 'list', '--json');
      assert.equal(listed.code, 0, listed.err);
      assert.doesNotMatch(listed.out, new RegExp(secret));
      const clients = JSON.parse(listed.out) as { client_id: string; type: string }[];
      assert.deepEqual(
        clients.map((c) => [c.client_id, c.type]),
        [
          [publicId, 'public'],
          [confId, 'confidential'],
        ],
      );

      const { tokens, jwt } = await g.withService(async (_ctx, app) => tokensFor(app, publicId));
      const removed = await g.gatehouse('oauth-clients', 'delete', publicId);
      assert.equal(removed.code, 0, removed.err);
      await g.withService(async (_ctx, app) => {
        const introspect = await app.inject({
          method: 'POST',
          url: '/auth/oauth2/introspect',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: `Basic ${Buffer.from(`${confId}:${secret}`).toString('base64')}`,
          },
          payload: `token=${tokens.access_token}`,
        });
        assert.deepEqual(introspect.json(), { active: false });
        const refresh = await app.inject({
          method: 'POST',
          url: '/auth/oauth2/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `grant_type=refresh_token&client_id=${publicId}&refresh_token=${tokens.refresh_token}`,
        });
        assert.equal(refresh.json().error, 'invalid_client');
        const feed = await app.inject({
          method: 'GET',
          url: '/auth/security-events',
          headers: { authorization: `Bearer ${jwt}` },
        });
        const revoked = (feed.json() as { type: string; details: unknown }[]).find(
          (e) => e.type === 'oauth_grant_revoked',
        );
        assert.deepEqual(revoked?.details, { client_id: publicId, by: 'operator' });
      });
    });

    it('refuses a missing name, a bad redirect URI and an unknown client, with exit 2 or 1', async () => {
      const noName = await g.gatehouse('oauth-clients', 'create', '--redirect-uri', REDIRECT);
      assert.equal(noName.code, 2);
      assert.match(noName.err, /give the client a --name/);
      const bad = await g.gatehouse(
        'oauth-clients',
        'create',
        '--name',
        'x',
        '--redirect-uri',
        'javascript:alert(1)',
      );
      assert.equal(bad.code, 2);
      assert.match(bad.err, /cannot be a redirect URI/);
      const unknown = await g.bin('', 'oauth-clients', 'delete', 'gh_nobody');
      assert.equal(unknown.code, 1);
      assert.match(unknown.err, /^no client has the id gh_nobody\n$/);
    });
  });
}
