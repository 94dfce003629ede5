/**
 * Passkeys in the development console, walked in headless Chromium with a virtual authenticator (the
 * DevTools protocol's WebAuthn domain, through playwright-core's CDP session): sign up with a passkey,
 * see it on the Security page, add a second one, sign out, sign in with a passkey. WebAuthn needs a
 * secure context and a domain for its RP ID, so the service is reached as http://localhost (RP ID
 * `localhost`). Each new page is photographed into docs/console/. Without Chromium the suite is skipped.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { BrowserContext, CDPSession, Locator, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { configFrom } from '../../src/config.ts';
import { closeContext } from '../../src/context.ts';
import { openPglite } from '../../src/db/database.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { tempDir } from '../helpers/app.ts';
import { migratedPgliteDump } from '../helpers/db.ts';
import { REPO_ROOT } from '../helpers/process.ts';
import { runsHere } from '../helpers/requirements.ts';
import { keepScreenshot } from '../helpers/screenshots.ts';

const SHOTS = path.join(REPO_ROOT, 'docs/console');
const MAX_SHOT_BYTES = 200_000;
const EMAIL = 'grace@example.com';
/** SENSITIVE_ACTION_WINDOW of the walk, in seconds. */
const WINDOW_S = 20;

function chromiumPath(): string {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'chromium');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('chromium is not on PATH');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface VirtualCredential {
  credentialId: string;
  isResidentCredential: boolean;
  rpId: string;
  signCount: number;
}

if (runsHere('chromium', 'the passkey walk-through in headless Chromium')) {
  describe('passkeys in the development console, in Chromium', () => {
    let server: RunningServer;
    let dataDir: string;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let cdp: CDPSession;
    let authenticatorId: string;
    let base: string;
    const pageProblems: string[] = [];

    before(async () => {
      dataDir = tempDir('gatehouse-passkeys-console-');
      profile = tempDir('gatehouse-chromium-');
      const port = await freePort();
      base = `http://localhost:${port}`;
      const config = configFrom({
        DATA_DIR: dataDir,
        CUSTOM_DIR: path.join(dataDir, 'custom'),
        HOST: '127.0.0.1',
        PORT: port,
        SERVER_URL: base,
        LOG_LEVEL: 'silent',
        ARGON2_MEMORY_COST: 1024,
        ARGON2_TIME_COST: 1,
        // Short, so that the walk can outlive it and show the step-up with a passkey.
        SENSITIVE_ACTION_WINDOW: WINDOW_S,
      });
      assert.equal(config.WEBAUTHN_RP_ID, 'localhost');
      await (await openPglite(path.join(dataDir, 'db'), await migratedPgliteDump())).close();
      server = await startServer(config, { log: pino({ level: 'silent' }) });
      context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath(),
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
        viewport: { width: 1000, height: 700 },
        locale: 'en-GB',
        timezoneId: 'UTC',
      });
      page = context.pages()[0] ?? (await context.newPage());
      page.setDefaultTimeout(15_000);
      page.on('pageerror', (err) => pageProblems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        if (/Content.Security.Policy|Refused to/i.test(msg.text())) pageProblems.push(msg.text());
      });
      // A platform authenticator that holds discoverable credentials, verifies its user and is touched
      // at once: what Touch ID or Windows Hello does after the person's consent.
      cdp = await context.newCDPSession(page);
      await cdp.send('WebAuthn.enable', { enableUI: false });
      ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          ctap2Version: 'ctap2_1',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      }));
      mkdirSync(SHOTS, { recursive: true });
    });

    after(async () => {
      await context?.close();
      if (server) {
        await server.app.close();
        await server.cliSocket?.close();
        await closeContext(server.ctx);
      }
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(profile, { recursive: true, force: true });
    });

    async function shot(name: string): Promise<void> {
      await page.evaluate('document.activeElement?.blur()');
      await page.evaluate('window.scrollTo(0, 0)');
      const png = await page.screenshot({ type: 'png', caret: 'hide', animations: 'disabled' });
      assert.ok(png.length < MAX_SHOT_BYTES, `${name}.png is ${png.length} bytes (limit ${MAX_SHOT_BYTES})`);
      await keepScreenshot(path.join(SHOTS, `${name}.png`), png);
    }

    const form = (name: string): Locator => page.getByRole('form', { name, exact: true });
    const nav = (name: string) => page.getByRole('navigation').getByRole('link', { name, exact: true });

    async function load(): Promise<void> {
      await page.goto(`${base}/console/`);
      await page.locator('body[data-ready="true"]').waitFor();
    }

    async function credentials(): Promise<VirtualCredential[]> {
      return (await cdp.send('WebAuthn.getCredentials', { authenticatorId }))
        .credentials as VirtualCredential[];
    }

    it('signs up with a passkey, adds another, signs out and signs in with a passkey', async () => {
      await load();
      assert.equal(
        await page.evaluate('window.isSecureContext'),
        true,
        'http://localhost is a secure context',
      );
      await form('Sign in with a passkey').waitFor();
      await shot('passkeys-sign-in');

      // Sign up: the browser makes a discoverable passkey for localhost; the account is active at once.
      const signUp = form('Sign up with a passkey');
      await signUp.getByLabel('Email').fill(EMAIL);
      await signUp.getByRole('button', { name: 'Sign up with a passkey' }).click();
      await page.getByText('Account created with a passkey; you are signed in.').waitFor();
      assert.equal(await page.locator('#session-email').textContent(), EMAIL);
      const made = await credentials();
      assert.equal(made.length, 1);
      assert.equal(made[0]?.rpId, 'localhost');
      assert.equal(made[0]?.isResidentCredential, true);

      // The Security page lists it; a second passkey is added without a password (a fresh sign-in).
      await nav('Security').click();
      const list = page.getByRole('list', { name: 'Your passkeys' });
      await list.waitFor();
      assert.equal(await list.getByRole('listitem').count(), 1);
      // The same device again is refused by the device itself: its passkey is in excludeCredentials.
      const add = form('Add a passkey');
      await add.getByLabel('Name').fill('Work laptop');
      await add.getByRole('button', { name: 'Add a passkey' }).click();
      await add.getByRole('alert').filter({ hasText: /.+/ }).waitFor();
      assert.equal(await list.getByRole('listitem').count(), 1);
      assert.equal((await credentials()).length, 1);
      // A second device (a security key; the first one is not touched this time) makes the second passkey.
      await cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled: false });
      const { authenticatorId: key } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          ctap2Version: 'ctap2_1',
          transport: 'usb',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      });
      await add.getByRole('button', { name: 'Add a passkey' }).click();
      await page.getByText('The passkey Work laptop was added.').waitFor();
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: key });
      await cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled: true });
      assert.equal(await list.getByRole('listitem').count(), 2);
      await shot('passkeys-security');

      // Sign out, then in again with a passkey: no address typed, the browser offers its passkey.
      await nav('Session').click();
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await form('Sign in with a passkey').waitFor();
      assert.equal(await page.locator('#who').textContent(), 'Signed out');
      await form('Sign in with a passkey').getByRole('button', { name: 'Sign in with a passkey' }).click();
      await page.getByText('Signed in with a passkey.').waitFor();
      assert.equal(await page.locator('#session-email').textContent(), EMAIL);
      const claims = JSON.parse((await page.locator('pre.claims').textContent()) ?? '{}');
      assert.ok(claims.sid, 'a session with an id');
      await shot('passkeys-session');
      // The authenticator counted the signature.
      assert.ok((await credentials()).some((c) => c.signCount > 0));

      // Later than SENSITIVE_ACTION_WINDOW, removing a passkey is confirmed with a passkey (a step-up):
      // no password, which this account does not have anyway.
      await page.waitForTimeout((WINDOW_S + 1) * 1000);
      await nav('Security').click();
      const rows = page.getByRole('list', { name: 'Your passkeys' }).getByRole('listitem');
      await rows.first().waitFor();
      assert.equal(await rows.count(), 2);
      await page.getByRole('button', { name: 'Remove the passkey Work laptop' }).click();
      await page.getByText('The passkey Work laptop was removed. Remove it from your device too.').waitFor();
      assert.equal(await rows.count(), 1);
      assert.deepEqual(pageProblems, []);
    });
  });
}
