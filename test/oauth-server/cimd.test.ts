/**
 * Client ID Metadata Documents: a client named by the URL of its metadata document, served here by the
 * test on 127.0.0.1 (OAUTH_CIMD_ALLOW_PRIVATE, as development sets it). The fetch's fences: the document
 * must name its own URL, no redirects, a size cap, and no loopback or private address unless allowed
 * (as in production, where the setting is off).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import { MetadataDocuments } from '../../src/auth/oauth-server/cimd.ts';
import { configFrom } from '../../src/config.ts';
import type { TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import {
  authorizeUrl,
  type Browser,
  buildOAuthApp,
  discover,
  fullFlow,
  MCP,
  REDIRECT,
  signedInBrowser,
} from './helpers.ts';

/** A little web server of metadata documents: path → [status, headers, body]. */
interface DocServer {
  base: string;
  served: Map<string, number>;
  set(path: string, body: unknown, headers?: Record<string, string>, status?: number): string;
  close(): Promise<void>;
}

async function docServer(): Promise<DocServer> {
  const routes = new Map<string, { status: number; headers: Record<string, string>; body: string }>();
  const served = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const r = routes.get(req.url ?? '');
    served.set(req.url ?? '', (served.get(req.url ?? '') ?? 0) + 1);
    if (!r) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers }).end(r.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    served,
    set(path, body, headers = {}, status = 200) {
      routes.set(path, { status, headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
      return `${base}${path}`;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

for (const kind of dbKinds()) {
  describe(`client metadata documents (CIMD) [${kind}]`, () => {
    let t: TestApp;
    let docs: DocServer;
    let as: oauth.AuthorizationServer;
    let browser: Browser;

    before(async () => {
      docs = await docServer();
      t = await buildOAuthApp(kind, { OAUTH_CIMD_ALLOW_PRIVATE: true });
      as = await discover(t);
      browser = await signedInBrowser(t);
    });
    after(async () => {
      await t.close();
      await docs.close();
    });

    it('signs a person in to a client named by its metadata document URL', async () => {
      const clientId = `${docs.base}/agent.json`;
      docs.set('/agent.json', {
        client_id: clientId,
        client_name: 'Research Agent',
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
      });
      const page = await t.app.inject({
        method: 'GET',
        url: authorizeUrl({ clientId, resources: [MCP], challenge: 'a'.repeat(43), method: 'S256' }),
        headers: { cookie: browser.cookie },
      });
      assert.equal(page.statusCode, 200, page.body);
      assert.match(page.body, /Research Agent/);
      assert.match(page.body, /describes itself at/);
      const { res, client } = await fullFlow(t, as, browser, { clientId });
      const result = await oauth.processAuthorizationCodeResponse(as, client, res);
      assert.equal(decodeJwt(result.access_token).client_id, clientId);
      assert.equal(decodeJwt(result.access_token).aud, MCP);
    });

    it('refuses a document that names another client_id than its URL (a client posing as another)', async () => {
      const clientId = docs.set('/impostor.json', {
        client_id: 'https://trusted.example.com/client.json',
        client_name: 'Trusted App',
        redirect_uris: [REDIRECT],
      });
      const res = await t.app.inject({
        method: 'GET',
        url: authorizeUrl({ clientId, resources: [MCP], challenge: 'a'.repeat(43), method: 'S256' }),
        headers: { cookie: browser.cookie },
      });
      assert.equal(res.statusCode, 400);
      assert.equal(res.headers.location, undefined);
      assert.match(res.body, /names another client_id/);
    });

    it('refuses a redirect URI the document does not list, on a page', async () => {
      const clientId = `${docs.base}/narrow.json`;
      docs.set('/narrow.json', { client_id: clientId, redirect_uris: ['https://app.example.com/cb'] });
      const res = await t.app.inject({
        method: 'GET',
        url: authorizeUrl({ clientId, resources: [MCP], challenge: 'a'.repeat(43), method: 'S256' }),
        headers: { cookie: browser.cookie },
      });
      assert.equal(res.statusCode, 400);
      assert.equal(res.headers.location, undefined);
    });
  });
}

describe('the metadata document fetch', () => {
  let docs: DocServer;
  before(async () => {
    docs = await docServer();
  });
  after(() => docs.close());
  const now = () => Date.now();

  it('is refused at loopback and private addresses in production (OAUTH_CIMD_ALLOW_PRIVATE off)', async () => {
    assert.equal(
      configFrom({
        NODE_ENV: 'production',
        DATABASE_URL: 'postgres://x@db/x',
        COOKIE_SECRET: 'c'.repeat(40),
        JWT_KEY: 'k'.repeat(40),
        JWT_ALGORITHM: 'HS256',
        MFA_ENABLED: false,
      }).OAUTH_CIMD_ALLOW_PRIVATE,
      false,
    );
    const guarded = new MetadataDocuments(false, now);
    const url = `${docs.base}/prod.json`;
    docs.set('/prod.json', { client_id: url, redirect_uris: [REDIRECT] });
    await assert.rejects(guarded.get(url), /must be https/);
    // https at a loopback literal, and a name that resolves to loopback: refused before any connection.
    const port = new URL(docs.base).port;
    await assert.rejects(guarded.get(`https://127.0.0.1:${port}/prod.json`), /private or loopback/);
    await assert.rejects(guarded.get(`https://[::1]:${port}/prod.json`), /private or loopback/);
    await assert.rejects(guarded.get(`https://localhost:${port}/prod.json`), /private or loopback/);
    await assert.rejects(guarded.get('https://10.1.2.3/client.json'), /private or loopback/);
    assert.equal(docs.served.get('/prod.json'), undefined, 'nothing was fetched');
  });

  it('does not follow redirects, caps the size, and keeps a document as long as its headers allow', async () => {
    const fetcher = new MetadataDocuments(true, now);
    const moved = docs.set('/moved.json', '', { location: `${docs.base}/agent.json` }, 302);
    await assert.rejects(fetcher.get(moved), /HTTP 302/);
    const big = `${docs.base}/big.json`;
    docs.set('/big.json', { client_id: big, redirect_uris: [REDIRECT], pad: 'x'.repeat(100_000) });
    await assert.rejects(fetcher.get(big), /larger than/);
    const cached = `${docs.base}/cached.json`;
    docs.set(
      '/cached.json',
      { client_id: cached, redirect_uris: [REDIRECT] },
      { 'cache-control': 'max-age=60' },
    );
    await fetcher.get(cached);
    await fetcher.get(cached);
    assert.equal(docs.served.get('/cached.json'), 1);
    const fresh = `${docs.base}/fresh.json`;
    docs.set('/fresh.json', { client_id: fresh, redirect_uris: [REDIRECT] }, { 'cache-control': 'no-store' });
    await fetcher.get(fresh);
    await fetcher.get(fresh);
    assert.equal(docs.served.get('/fresh.json'), 2);
    await assert.rejects(fetcher.get(`${docs.base}/agent.json#x`), /normal form|fragment/);
    const secret = `${docs.base}/secret.json`;
    docs.set('/secret.json', {
      client_id: secret,
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    await assert.rejects(fetcher.get(secret), /public clients/);
  });
});
