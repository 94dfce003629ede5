/**
 * The console's admin pages, walked in headless Chromium against the service as `npm start` runs it
 * (PGlite and the development outbox in a temporary DATA_DIR), with an admin secret and ADMIN_ROLE set:
 * sign in to the admin pages with the secret, find a user by email, open them (state, roles, MFA,
 * providers, sessions, feed, files), edit their roles, sign them out everywhere (their access token is
 * then refused), disable and enable them, copy a reset link and send a magic link, see the email outbox;
 * then, the secret forgotten, the same pages by an ADMIN_ROLE session. Every call goes to /admin (or to
 * storage for files) and the secret never appears in an address. Pictures go to docs/console/.
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
const SECRET = 'console-admin-secret-of-at-least-32-chars';
const PASSWORD = 'correct horse battery staple';
const GRACE = 'grace.hopper@example.com';
const ADMIN = 'operator@example.com';

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

if (runsHere('chromium', 'the console admin pages in headless Chromium')) {
  describe('the console admin pages in Chromium', () => {
    let server: RunningServer;
    let dataDir: string;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let base: string;
    const pageProblems: string[] = [];
    /** Every address the page asked for (the secret must be in none). */
    const requested: string[] = [];
    /** Grace's access token and user id, from a sign-in outside the browser. */
    let grace: { jwt: string; id: string };

    const adminHeaders = { 'x-hasura-admin-secret': SECRET };
    const post = (url: string, data: unknown, headers: Record<string, string> = adminHeaders) =>
      page.request.post(`${base}${url}`, { data: data as never, headers });

    before(async () => {
      dataDir = tempDir('gatehouse-admin-console-');
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
        HASURA_GRAPHQL_ADMIN_SECRET: SECRET,
        ADMIN_ROLE: 'admin',
        DEFAULT_ALLOWED_USER_ROLES: ['user'],
        ALLOWED_USER_ROLES: ['user', 'editor'],
        LOST_PASSWORD_ENABLED: true,
        MAGIC_LINK_ENABLED: true,
        RATE_LIMIT_ENABLED: false,
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
      page.on('request', (req) => requested.push(req.url()));
      mkdirSync(SHOTS, { recursive: true });

      // The people: Grace (signed in elsewhere, with a file) and an operator with the admin role.
      const made = await post('/admin/users', { email: GRACE, password: PASSWORD, active: true });
      assert.equal(made.status(), 201, await made.text());
      const admin = await post('/admin/users', {
        email: ADMIN,
        password: PASSWORD,
        roles: ['user', 'admin'],
        active: true,
      });
      assert.equal(admin.status(), 201, await admin.text());
      const signIn = await post('/auth/login', { email: GRACE, password: PASSWORD, cookie: false }, {});
      grace = { jwt: (await signIn.json()).jwt_token, id: (await made.json()).id };
      const upload = await page.request.post(`${base}/storage/o/user/${grace.id}/notes.txt`, {
        multipart: {
          file: { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('bugs, found') },
        },
        headers: { authorization: `Bearer ${grace.jwt}` },
      });
      assert.equal(upload.status(), 200, await upload.text());
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

    /** Photographs the page (its top, or with `at` in view) into docs/console/<name>.png. */
    async function shot(name: string, at?: Locator): Promise<void> {
      await page.evaluate('document.activeElement?.blur()');
      if (at) await at.evaluate((el) => el.scrollIntoView({ block: 'center' }));
      else await page.evaluate('window.scrollTo(0, 0)');
      const png = await page.screenshot({ type: 'png', caret: 'hide', animations: 'disabled' });
      assert.ok(png.length < MAX_SHOT_BYTES, `${name}.png is ${png.length} bytes (limit ${MAX_SHOT_BYTES})`);
      const meta = await sharp(png).metadata();
      assert.deepEqual([meta.width, meta.height], [1000, 700]);
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
    const status = () => page.locator('p.notice[role="status"]');

    async function load(): Promise<void> {
      await page.goto(`${base}/console/`);
      await page.locator('body[data-ready="true"]').waitFor();
    }

    it('with the admin secret: find, open, edit roles, sign out, disable, enable, links, files, emails', async () => {
      await load();
      await nav('Admin').click();
      await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
      // A wrong secret is refused, and the pages keep asking.
      await form('Admin secret').getByLabel('Admin secret').fill('not-the-secret');
      await form('Admin secret').getByRole('button', { name: 'Use the admin secret' }).click();
      await form('Admin secret').getByText('Invalid x-admin-secret').waitFor();
      await form('Admin secret').getByLabel('Admin secret').fill(SECRET);
      await form('Admin secret').getByRole('button', { name: 'Use the admin secret' }).click();
      await page.getByRole('table', { name: 'Users' }).getByRole('link', { name: GRACE }).waitFor();
      await shot('admin-users');
      await unlabelled();

      // Find by part of the address, open.
      await form('Find a user').getByLabel('Email').fill('grace');
      await form('Find a user').getByRole('button', { name: 'Find' }).click();
      await page.getByText('1 user(s) shown.').waitFor();
      await page.getByRole('table', { name: 'Users' }).getByRole('link', { name: GRACE }).click();
      await page.getByRole('heading', { name: GRACE, level: 1 }).waitFor();
      assert.equal(await page.locator('#admin-user-state').textContent(), 'Active');
      assert.equal(await page.getByRole('table', { name: 'Sessions' }).getByRole('row').count(), 2);
      await page.locator('#admin-files').getByText(`user/${grace.id}/notes.txt`).waitFor();
      await page.getByRole('listitem').filter({ hasText: 'admin_user_created' }).first().waitFor();
      await shot('admin-user');
      await unlabelled();

      // Roles: editor added.
      await form('Roles').getByLabel('Roles').fill('user, editor');
      await form('Roles').getByRole('button', { name: 'Save roles' }).click();
      await status().getByText('Roles saved.').waitFor();
      assert.equal(await page.locator('#admin-user-roles').textContent(), 'user, editor (default user)');

      // Sign out everywhere: Grace's access token is refused at once.
      await page.getByRole('button', { name: 'Sign out everywhere' }).click();
      await status().getByText('1 session(s) ended').waitFor();
      const refused = await page.request.get(`${base}/auth/sessions`, {
        headers: { authorization: `Bearer ${grace.jwt}` },
      });
      assert.equal(refused.status(), 401);
      await page.locator('#admin-user-sessions').getByText('No live session.').waitFor();

      // Disable, then enable.
      await page.getByRole('button', { name: 'Disable' }).click();
      await status().getByText('Disabled: every session ended at once.').waitFor();
      assert.equal(await page.locator('#admin-user-state').textContent(), 'Disabled');
      const blocked = await post('/auth/login', { email: GRACE, password: PASSWORD, cookie: false }, {});
      assert.equal(blocked.status(), 403);
      await page.getByRole('button', { name: 'Enable' }).click();
      await status().getByText('Enabled').waitFor();
      assert.equal(await page.locator('#admin-user-state').textContent(), 'Active');

      // A reset link to copy: a working link in the field.
      await page.getByLabel('Kind of link').selectOption('password-reset');
      await page.getByRole('button', { name: 'Make a link to copy' }).click();
      const url = await page.locator('#admin-link-url').inputValue();
      assert.match(url, /[?&]ticket=[0-9a-f-]{36}&type=password-reset/);
      await shot('admin-link', page.locator('#admin-link'));
      // A magic link sent by email.
      await page.getByLabel('Kind of link').selectOption('magic-link');
      await page.getByRole('button', { name: 'Send it by email' }).click();
      await page.locator('#admin-link').getByText(`Emailed to ${GRACE}`).waitFor();

      // The email outbox lists it (state only, never the link).
      await nav('Emails').click();
      const row = page
        .getByRole('table', { name: 'Emails' })
        .getByRole('row')
        .filter({ hasText: 'magic-link' });
      await row.first().waitFor();
      assert.match((await row.first().textContent()) ?? '', /grace\.hopper@example\.com/);
      await page.getByText('No webhook delivery has been given up').waitFor();
      await shot('admin-emails');
      await unlabelled();

      assert.deepEqual(pageProblems, []);
      assert.ok(
        requested.every((u) => !u.includes(SECRET)),
        'the admin secret is in no address the page asked for',
      );
      assert.ok(
        requested.some((u) => u.includes('/admin/users/')),
        'the pages went through the admin API',
      );
      assert.ok(
        requested.every((u) => !u.includes('/console/api/outbox')),
        'no second path into the data',
      );
    });

    it('with an ADMIN_ROLE session instead of the secret: the same pages, files closed to it', async () => {
      await nav('Admin').click();
      await page.getByRole('button', { name: 'Forget the admin secret' }).click();
      await form('Admin secret').waitFor();
      assert.equal(await page.evaluate("sessionStorage.getItem('gatehouse.admin-secret')"), null);
      await nav('Sign in').click();
      await form('Sign in').getByLabel('Email').fill(ADMIN);
      await form('Sign in').getByLabel('Password').fill(PASSWORD);
      await form('Sign in').getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Session', level: 1 }).waitFor();
      await nav('Admin').click();
      await page.getByText('Your session has the role admin').waitFor();
      await page.getByRole('table', { name: 'Users' }).getByRole('link', { name: GRACE }).click();
      await page.getByRole('heading', { name: GRACE, level: 1 }).waitFor();
      await page.getByText('Browsing another user’s files needs the admin secret').waitFor();
      // The roles saved by the secret are there, and a change by this session is credited to its user.
      await form('Roles').getByLabel('Roles').fill('user');
      await form('Roles').getByRole('button', { name: 'Save roles' }).click();
      await status().getByText('Roles saved.').waitFor();
      await page.getByRole('listitem').filter({ hasText: 'by admin' }).first().waitFor();
      assert.deepEqual(pageProblems, []);
    });
  });
}
