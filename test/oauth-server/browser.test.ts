/**
 * The person's side of an authorization request in a real browser (Chromium driven by playwright-core),
 * against the service started as `npm start` starts it: the client sends the browser to
 * /auth/oauth2/authorize; without a session it lands on the console's sign-in page, signs in, is taken
 * back to the request (return_to), reads the consent page (its Content-Security-Policy refusing nothing,
 * the redirect after the form's post included) and allows; the browser arrives at the client's redirect
 * URI with the code and the state, and the app's page exchanges the code itself (cross-origin, CORS).
 * Without Chromium the suite is reported as skipped.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer as netServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { createClient } from '../../src/auth/oauth-server/clients.ts';
import { configFrom } from '../../src/config.ts';
import { closeContext } from '../../src/context.ts';
import { openPglite } from '../../src/db/database.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { tempDir } from '../helpers/app.ts';
import { migratedPgliteDump } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';

const MCP = 'https://mcp.example.com/mcp';
const EMAIL = 'grace@example.com';
const PASSWORD = 'correct horse battery staple';

function chromiumPath(): string {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'chromium');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('chromium is not on PATH');
}

async function freePort(): Promise<number> {
  const s = netServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

if (runsHere('chromium', 'the OAuth consent walk in headless Chromium')) {
  describe('an OAuth authorization request in Chromium', () => {
    let server: RunningServer;
    let app: Server;
    let appUrl: string;
    let dataDir: string;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let base: string;
    const problems: string[] = [];

    before(async () => {
      dataDir = tempDir('gatehouse-oauth-browser-');
      profile = tempDir('gatehouse-chromium-');
      // The client application: its redirect URI answers a small page.
      app = createServer((_req, res) =>
        res.writeHead(200, { 'content-type': 'text/html' }).end('<p>back in the app</p>'),
      );
      await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
      appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      const config = configFrom({
        DATA_DIR: dataDir,
        CUSTOM_DIR: path.join(dataDir, 'custom'),
        HOST: '127.0.0.1',
        PORT: port,
        SERVER_URL: base,
        LOG_LEVEL: 'silent',
        ARGON2_MEMORY_COST: 1024,
        ARGON2_TIME_COST: 1,
        JWT_ALGORITHM: 'ES256',
        OAUTH_SERVER_ENABLED: true,
        OAUTH_RESOURCES: [MCP],
        // Not the client app's origin: its token exchange must pass as any browser-based client's does.
        CORS_ORIGINS: ['https://app.example.com'],
      });
      await (await openPglite(path.join(dataDir, 'db'), await migratedPgliteDump())).close();
      server = await startServer(config, { log: pino({ level: 'silent' }) });
      const reg = await fetch(`${base}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: EMAIL, password: PASSWORD, cookie: false }),
      });
      assert.equal(reg.status, 200, await reg.text());
      context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath(),
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
        viewport: { width: 1000, height: 700 },
      });
      page = context.pages()[0] ?? (await context.newPage());
      page.setDefaultTimeout(20_000);
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        if (/Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
      });
    });

    after(async () => {
      await context?.close();
      if (server) {
        await server.app.close();
        await server.cliSocket?.close();
        await closeContext(server.ctx);
      }
      await new Promise((resolve) => app?.close(resolve));
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(profile, { recursive: true, force: true });
    });

    it('signs in on the console, comes back to the consent page, allows, and reaches the app with a code', async () => {
      const redirect = `${appUrl}/callback`;
      const { clientId } = await createClient(
        server.ctx.db,
        { name: 'Notes Agent', redirectUris: [redirect], confidential: false },
        'operator',
      );
      const verifier = randomBytes(32).toString('base64url');
      const q = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirect,
        scope: 'openid email',
        resource: MCP,
        state: 'st4te',
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
      });
      await page.goto(`${base}/auth/oauth2/authorize?${q}`);
      // No session: the console's sign-in page.
      const signIn = page.getByRole('form', { name: 'Sign in' });
      await signIn.getByLabel('Email').fill(EMAIL);
      await signIn.getByLabel('Password').fill(PASSWORD);
      await signIn.getByRole('button', { name: 'Sign in' }).click();
      // Back to the request: the consent page names the client, where it goes back to, and the resource.
      await page.getByRole('heading', { name: /Notes Agent/ }).waitFor();
      const text = await page.locator('main').innerText();
      assert.match(text, /127\.0\.0\.1/);
      assert.match(text, /see your email address/);
      assert.ok(text.includes(MCP));
      await page.getByRole('button', { name: 'Allow' }).click();
      await page
        .waitForURL((u) => u.toString().startsWith(redirect))
        .catch(async (err) => {
          throw new Error(
            `${err}; at ${page.url()}: ${(await page.content()).slice(0, 500)}; problems: ${problems.join(' / ')}`,
          );
        });
      const back = new URL(page.url());
      assert.equal(back.searchParams.get('state'), 'st4te');
      assert.equal(back.searchParams.get('iss'), base);
      const code = back.searchParams.get('code') as string;
      assert.ok(code);
      // The exchange from the app's own page, as a browser-based client (an SPA, the MCP Inspector) makes
      // it: a cross-origin fetch that CORS must let the page read, though CORS_ORIGINS does not list it.
      const exchanged = await page.evaluate(
        async ({ base, body }) => {
          const meta = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as {
            token_endpoint: string;
          };
          const res = await fetch(meta.token_endpoint, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams(body),
          });
          return {
            status: res.status,
            json: (await res.json()) as { token_type?: string; access_token?: string },
          };
        },
        {
          base,
          body: {
            grant_type: 'authorization_code',
            code,
            redirect_uri: redirect,
            code_verifier: verifier,
            client_id: clientId,
          },
        },
      );
      assert.equal(exchanged.status, 200, JSON.stringify(exchanged.json));
      assert.equal(exchanged.json.token_type, 'Bearer');
      assert.ok(exchanged.json.access_token);

      // The console's Security page lists the application; removing it ends its access.
      await page.goto(`${base}/console/#/security`);
      const apps = page.getByRole('region', { name: 'Connected applications' });
      await apps.getByText('Notes Agent').waitFor();
      await apps.getByRole('button', { name: 'Remove Notes Agent' }).click();
      await apps.getByText('Notes Agent no longer has access.').waitFor();
      await apps.getByText('No application has access to your account.').waitFor();
      assert.deepEqual(problems, []);
    });
  });
}
