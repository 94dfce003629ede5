/**
 * The console's Sessions and Security feed pages, walked in a real browser (Chromium through
 * playwright-core, as console.test.ts does) against the service as `npm start` runs it on embedded
 * defaults: the account is signed in on "another device" (a Firefox user agent, over HTTP) and in the
 * browser; the Sessions page lists both with this one marked, ends the other (whose access token is then
 * refused at once), and the feed shows the sign-ins, the wrong password and the ended session. Ending
 * this device's own session signs the page out. Each page is photographed into docs/console/.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import sharp from 'sharp';
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
const PASSWORD = 'correct horse battery staple';
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0';

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

if (runsHere('chromium', 'the console sessions and feed pages in headless Chromium')) {
  describe('the console’s Sessions and Security feed pages in Chromium', () => {
    let server: RunningServer;
    let dataDir: string;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let base: string;
    const pageProblems: string[] = [];

    before(async () => {
      dataDir = tempDir('gatehouse-console-sessions-');
      profile = tempDir('gatehouse-chromium-');
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
      });
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
      const meta = await sharp(png).metadata();
      assert.deepEqual([meta.width, meta.height], [1000, 700], `${name}.png is the viewport`);
      await keepScreenshot(path.join(SHOTS, `${name}.png`), png);
    }

    async function unlabelled(): Promise<void> {
      const missing = await page.evaluate(`[...document.querySelectorAll('input, select, textarea')]
        .filter((el) => el.type !== 'hidden' && el.labels.length === 0 && !el.getAttribute('aria-label'))
        .map((el) => el.outerHTML)
        .concat([...document.querySelectorAll('button, a[href]')]
          .filter((el) => el.textContent.trim() === '' && !el.getAttribute('aria-label'))
          .map((el) => el.outerHTML))`);
      assert.deepEqual(missing, [], `on ${page.url()}`);
    }

    const form = (name: string): Locator => page.getByRole('form', { name, exact: true });
    const nav = (name: string) => page.getByRole('navigation').getByRole('link', { name, exact: true });
    const http = (
      url: string,
      init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
    ) =>
      fetch(`${base}${url}`, {
        method: init.method ?? 'GET',
        headers: { 'content-type': 'application/json', ...init.headers },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });

    it('lists the sessions with this one marked, ends another at once, and shows the feed', async () => {
      // The account, signed in on another device (Firefox), and one wrong password.
      const registered = await http('/auth/register', {
        method: 'POST',
        body: { email: EMAIL, password: PASSWORD, cookie: false },
        headers: { 'user-agent': FIREFOX },
      });
      assert.equal(registered.status, 200, await registered.clone().text());
      const other = (await registered.json()) as { jwt_token: string };
      const wrong = await http('/auth/login', {
        method: 'POST',
        body: { email: EMAIL, password: 'not it at all' },
      });
      assert.equal(wrong.status, 401);

      // Sign in in the browser.
      await page.goto(`${base}/console/`);
      await page.locator('body[data-ready="true"]').waitFor();
      await form('Sign in').getByLabel('Email').fill(EMAIL);
      await form('Sign in').getByLabel('Password').fill(PASSWORD);
      await form('Sign in').getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByText('Signed in.', { exact: true }).waitFor();

      // Sessions: two, newest first, this device marked.
      await nav('Sessions').click();
      await page.getByRole('heading', { name: 'Sessions', level: 1 }).waitFor();
      const rows = page.locator('table.sessions tbody tr');
      assert.equal(await rows.count(), 2);
      const mine = rows.filter({ hasText: 'This device' });
      assert.equal(await mine.count(), 1);
      assert.match((await mine.locator('th').textContent()) ?? '', /^Chrome/);
      const firefox = rows.filter({ hasText: 'Firefox on Linux' });
      assert.equal(await firefox.count(), 1);
      assert.deepEqual(
        await firefox
          .getByRole('cell')
          .allTextContents()
          .then((c) => c.slice(0, 2)),
        ['127.0.0.1', 'password'],
      );
      await shot('sessions');
      await unlabelled();

      // End the Firefox session: the page says so, and that device's access token is refused at once.
      await firefox.getByRole('button', { name: /^End the session on Firefox on Linux/ }).click();
      await page.getByText('The session on Firefox on Linux was ended.', { exact: false }).waitFor();
      assert.equal(await rows.count(), 1);
      const refused = await http('/auth/sessions', {
        headers: { authorization: `Bearer ${other.jwt_token}` },
      });
      assert.equal(refused.status, 401);

      // The feed: the ended session, both sign-ins and the wrong password, newest first.
      await nav('Feed').click();
      await page.getByRole('heading', { name: 'Security feed', level: 1 }).waitFor();
      const feed = page.locator('table.feed tbody tr');
      await feed.first().waitFor();
      const what = await feed.locator('th').allTextContents();
      assert.deepEqual(what, [
        '1 session ended (ended by owner)',
        'Signed in (password)',
        'Wrong password',
        'Signed in (password)',
      ]);
      assert.equal(await feed.filter({ hasText: 'Firefox on Linux' }).count(), 1);
      // Fewer than a page: nothing older to show.
      assert.equal(await page.getByRole('button', { name: 'Show older' }).isVisible(), false);
      await shot('feed');
      await unlabelled();

      // Ending this device's own session signs the page out.
      await nav('Sessions').click();
      await page.getByRole('button', { name: /^End the session on Chrome/ }).click();
      await page.getByText('This session was ended; you are signed out here.').waitFor();
      assert.equal(await page.locator('#who').textContent(), 'Signed out');
      assert.deepEqual(pageProblems, [], 'no script error and nothing the Content-Security-Policy refused');
    });
  });
}
