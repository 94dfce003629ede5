/**
 * A real MCP client (@modelcontextprotocol/sdk's client and its OAuth flow) connects to the example MCP
 * server (examples/mcp-server) through Gatehouse, run as a real process: discovery from the server's 401
 * (RFC 9728 metadata, then Gatehouse's RFC 8414 metadata), the client named by its metadata document
 * (CIMD, served by the test over https with a certificate Gatehouse trusts through NODE_EXTRA_CA_CERTS)
 * or registered dynamically (RFC 7591), PKCE, the person's consent given by a scripted browser step (the
 * consent form posted as a browser posts it), and a tool call that succeeds. The token is then refused by
 * another MCP server: it is bound to the first one's URL.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { type AddressInfo, createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { startMcpExample } from '../../examples/mcp-server/server.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';
import { killIfRunning, runNode, type ServiceProcess } from '../helpers/process.ts';
import { runsHere } from '../helpers/requirements.ts';

const REDIRECT = 'http://127.0.0.1:8976/oauth/callback';

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** What an MCP client application keeps: its registration, tokens and PKCE verifier. */
class TestProvider implements OAuthClientProvider {
  authUrl: URL | undefined;
  private info: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  constructor(readonly clientMetadataUrl?: string) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: 'SDK test client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(i: OAuthClientInformationMixed) {
    this.info = i;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  redirectToAuthorization(u: URL) {
    this.authUrl = u;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

// openssl makes the certificate of the https server that serves the client metadata document.
const kinds = runsHere('openssl', 'the MCP client walk (a certificate made with openssl)') ? dbKinds() : [];
for (const kind of kinds) {
  describe(`an MCP client signs in through Gatehouse [${kind}]`, () => {
    const dir = tempDir('gatehouse-mcp-');
    let gatehouse: ServiceProcess;
    let gatehouseUrl: string;
    let database: TestDatabase | undefined;
    let docs: Server;
    let docsUrl: string;
    let mcp: Awaited<ReturnType<typeof startMcpExample>>;
    let other: Awaited<ReturnType<typeof startMcpExample>>;
    let mcpUrl: string;
    let cookie = '';

    before(async () => {
      // A certificate for 127.0.0.1, trusted by the Gatehouse process only.
      const key = path.join(dir, 'key.pem');
      const cert = path.join(dir, 'cert.pem');
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
          '-addext',
          'subjectAltName=IP:127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      docs = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
        if (req.url !== '/client.json') return void res.writeHead(404).end();
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: `${docsUrl}/client.json`,
            client_name: 'SDK CIMD client',
            redirect_uris: [REDIRECT],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none',
          }),
        );
      });
      await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
      docsUrl = `https://127.0.0.1:${(docs.address() as AddressInfo).port}`;

      const port = await freePort();
      gatehouseUrl = `http://127.0.0.1:${port}`;
      const mcpPort = await freePort();
      mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
      mcp = await startMcpExample({ gatehouseUrl, mcpUrl, port: mcpPort });
      const otherPort = await freePort();
      other = await startMcpExample({
        gatehouseUrl,
        mcpUrl: `http://127.0.0.1:${otherPort}/mcp`,
        port: otherPort,
      });

      const env: Record<string, string> = {
        PORT: String(port),
        HOST: '127.0.0.1',
        SERVER_URL: gatehouseUrl,
        DATA_DIR: path.join(dir, 'data'),
        LOG_LEVEL: 'info',
        JWT_ALGORITHM: 'ES256',
        OAUTH_SERVER_ENABLED: 'true',
        OAUTH_DYNAMIC_REGISTRATION: 'true',
        OAUTH_CIMD_ALLOW_PRIVATE: 'true',
        OAUTH_RESOURCES: `${mcpUrl},http://127.0.0.1:${otherPort}/mcp`,
        RATE_LIMIT_ENABLED: 'false',
        ARGON2_MEMORY_COST: '1024',
        ARGON2_TIME_COST: '1',
        NODE_EXTRA_CA_CERTS: cert,
      };
      if (kind === 'postgres') {
        database = await createTestDatabase('postgres');
        env.DATABASE_URL = database.url as string;
      }
      gatehouse = runNode('src/main.ts', env);
      await gatehouse.listening;

      // The person signs in in their browser (cookies).
      const email = `mcp-${process.pid}-${Date.now()}@example.com`;
      const password = 'correct horse battery';
      const reg = await fetch(`${gatehouseUrl}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password, cookie: false }),
      });
      assert.equal(reg.status, 200, await reg.clone().text());
      const login = await fetch(`${gatehouseUrl}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password, cookie: true }),
      });
      assert.equal(login.status, 200);
      cookie = login.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
    });
    after(async () => {
      killIfRunning(gatehouse);
      await gatehouse?.exited;
      await mcp?.close();
      await other?.close();
      await new Promise((resolve) => docs?.close(resolve));
      await database?.drop();
    });

    /** The browser's step: open the authorization URL, allow on the consent page, follow back: the code. */
    async function consent(authUrl: URL, expectName: string): Promise<string> {
      const page = await fetch(authUrl, { headers: { cookie }, redirect: 'manual' });
      assert.equal(
        page.status,
        200,
        `consent page expected, got ${page.status} ${page.headers.get('location')}`,
      );
      const html = await page.text();
      assert.ok(html.includes(expectName), 'the consent page names the client');
      const fields = [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map(
        (m) =>
          [m[1] as string, (m[2] as string).replace(/&amp;/g, '&').replace(/&quot;/g, '"')] as [
            string,
            string,
          ],
      );
      const posted = await fetch(`${gatehouseUrl}/auth/oauth2/authorize`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: gatehouseUrl },
        body: new URLSearchParams([...fields, ['decision', 'allow']]).toString(),
        redirect: 'manual',
      });
      assert.equal(posted.status, 303, await posted.text());
      const back = new URL(posted.headers.get('location') as string);
      assert.equal(back.origin + back.pathname, REDIRECT);
      assert.equal(back.searchParams.get('state'), authUrl.searchParams.get('state'));
      return back.searchParams.get('code') as string;
    }

    async function connectAndCall(provider: TestProvider, expectName: string) {
      const first = new Client({ name: 'gatehouse-test', version: '1.0.0' });
      const t1 = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
      await assert.rejects(first.connect(t1), UnauthorizedError);
      assert.ok(provider.authUrl, 'the SDK found Gatehouse from the 401 and built an authorization URL');
      assert.equal(provider.authUrl.origin, gatehouseUrl);
      assert.equal(provider.authUrl.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(provider.authUrl.searchParams.get('resource'), mcpUrl);
      const code = await consent(provider.authUrl, expectName);
      await t1.finishAuth(code);
      const client = new Client({ name: 'gatehouse-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider }));
      const result = (await client.callTool({ name: 'whoami' })) as { content: { text: string }[] };
      await client.close();
      return JSON.parse(result.content[0]?.text ?? '{}') as { sub: string; client_id: string };
    }

    it('connects with a client metadata document (CIMD) and calls a tool', async () => {
      const provider = new TestProvider(`${docsUrl}/client.json`);
      const who = await connectAndCall(provider, 'SDK CIMD client');
      assert.match(who.sub, /^[0-9a-f-]{36}$/);
      assert.equal(who.client_id, `${docsUrl}/client.json`);

      // The same token at another MCP server: refused (its audience is the first server).
      const token = provider.tokens()?.access_token as string;
      const res = await fetch(`${other.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(res.status, 401);
      assert.match(
        res.headers.get('www-authenticate') ?? '',
        /resource_metadata="[^"]+", error="invalid_token"/,
      );
    });

    it('connects with dynamic client registration and calls a tool', async () => {
      const provider = new TestProvider();
      const who = await connectAndCall(provider, 'SDK test client');
      assert.match(who.client_id, /^gh_/);
      assert.equal(provider.clientInformation()?.client_id, who.client_id);
    });
  });
}
