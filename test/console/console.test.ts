/**
 * The development console, walked through in a real browser (Debian's Chromium driven by playwright-core)
 * against the service started as `npm start` starts it on embedded defaults (PGlite and the development
 * outbox in a temporary DATA_DIR): a signed-out load that asks for nothing missing or refused, what is
 * switched on, sign up, follow the activation link from the outbox, sign in, enrol MFA from the page's
 * secret (the page then says it is on), upload an image and see its thumbnail, upload where the rules
 * allow, reset the password through the emailed link and sign in with the new one (and a TOTP code),
 * change the email and follow the notice sent to the old address. Each page is photographed into
 * docs/console/ (the README shows one). Without Chromium the suite is reported as skipped.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Secret, TOTP } from 'otpauth';
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
/** Screenshots are documentation: small enough to keep in the repository. */
const MAX_SHOT_BYTES = 200_000;
const EMAIL = 'ada@example.com';
const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'another long passphrase 42';
const NEW_EMAIL = 'ada.lovelace@example.com';

/** The chromium binary on PATH (what `which chromium` names). */
function chromiumPath(): string {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'chromium');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('chromium is not on PATH');
}

/** A port the system has just handed out (bound to 127.0.0.1 with port 0, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A small picture worth a thumbnail: a gradient with a sun. */
async function photo(): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="400">
    <defs><linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">
      <stop offset="0" stop-color="#2b5876"/><stop offset="1" stop-color="#f6a45c"/></linearGradient></defs>
    <rect width="640" height="400" fill="url(#sky)"/><circle cx="420" cy="250" r="70" fill="#ffd86b"/>
    <rect y="300" width="640" height="100" fill="#1d3b4f"/></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** What the walk reads of an `<img>` (the tests are compiled without the DOM's types). */
interface Img {
  complete: boolean;
  naturalWidth: number;
  addEventListener(type: 'load', listener: () => void, options: { once: true }): void;
}

/** Waits until the image of `locator` has loaded (or failed), then gives its natural width. */
async function naturalWidth(locator: Locator): Promise<number> {
  return locator.evaluate(async (el) => {
    const img = el as unknown as Img;
    if (!img.complete)
      await new Promise<void>((resolve) => img.addEventListener('load', resolve, { once: true }));
    return img.naturalWidth;
  });
}

if (runsHere('chromium', 'the console walk-through in headless Chromium')) {
  describe('the development console in Chromium', () => {
    let server: RunningServer;
    let dataDir: string;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let base: string;
    /** Problems the page reported: script errors and Content-Security-Policy refusals. */
    const pageProblems: string[] = [];
    /** Answers of 400 and above, and errors in the browser's console (a failed load logs one). */
    let complaints: string[] = [];

    before(async () => {
      dataDir = tempDir('gatehouse-console-');
      profile = tempDir('gatehouse-chromium-');
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      // Embedded defaults, as `npm start` runs with no settings, plus the flows the walk needs: activation
      // by email and the lost-password link. SERVER_URL is the browser's origin so that links land here.
      const config = configFrom({
        DATA_DIR: dataDir,
        CUSTOM_DIR: path.join(dataDir, 'custom'),
        HOST: '127.0.0.1',
        PORT: port,
        SERVER_URL: base,
        LOG_LEVEL: 'silent',
        ARGON2_MEMORY_COST: 1024,
        ARGON2_TIME_COST: 1,
        AUTO_ACTIVATE_NEW_USERS: false,
        LOST_PASSWORD_ENABLED: true,
        VERIFY_EMAILS: true,
      });
      // The embedded database starts from an already migrated copy (a fresh initdb takes long on a busy
      // machine); the service opens it in DATA_DIR/db as on any later start.
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
        if (msg.type() === 'error') complaints.push(`console: ${msg.text()}`);
      });
      page.on('response', (res) => {
        if (res.status() >= 400) complaints.push(`${res.status()} ${res.request().method()} ${res.url()}`);
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

    /**
     * Photographs the page into docs/console/<name>.png and checks the picture stays small. A picture that
     * differs from the one already there only in data (ids, times, the QR code) is left alone
     * (test/helpers/screenshots.ts), so that a test run does not rewrite the documentation for nothing.
     */
    async function shot(name: string): Promise<void> {
      const file = path.join(SHOTS, `${name}.png`);
      // Focus rings and the caret would make the pictures differ from run to run for nothing.
      await page.evaluate('document.activeElement?.blur()');
      // The top of the page, whatever a click scrolled to.
      await page.evaluate('window.scrollTo(0, 0)');
      const png = await page.screenshot({ type: 'png', caret: 'hide', animations: 'disabled' });
      assert.ok(png.length < MAX_SHOT_BYTES, `${name}.png is ${png.length} bytes (limit ${MAX_SHOT_BYTES})`);
      const meta = await sharp(png).metadata();
      assert.deepEqual([meta.width, meta.height], [1000, 700], `${name}.png is the viewport`);
      await keepScreenshot(file, png);
    }

    /** Fails when a field of the page has no label, or a button or link no name a screen reader can say. */
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

    /** Opens the outbox and waits for a message of `template` (emails go out after the answer). */
    async function openOutboxAt(template: string): Promise<Locator> {
      await nav('Outbox').click();
      const messages = page.locator('article.message', { hasText: template });
      for (let i = 0; (await messages.count()) === 0; i++) {
        assert.ok(i < 50, `a ${template} email reached the outbox`);
        await page.waitForTimeout(100);
        await page.getByRole('button', { name: 'Reload' }).click();
      }
      return messages.first();
    }

    /** Opens the outbox and follows the link of the newest message of `template`. */
    async function followEmailedLink(template: string, linkName: string): Promise<void> {
      const message = await openOutboxAt(template);
      await message.getByRole('link', { name: linkName }).click();
    }

    /** Loads the console afresh (or `url`) and waits until it has drawn its first page. */
    async function load(url = `${base}/console/`): Promise<void> {
      await page.goto(url);
      await page.locator('body[data-ready="true"]').waitFor();
    }

    /** The element that has focus, as `tag[name]`. */
    const focused = () =>
      page.evaluate(
        "(() => { const el = document.activeElement; return el?.tagName.toLowerCase() + '[' + (el?.getAttribute('name') ?? '') + ']'; })()",
      );

    it('loads signed out without a refused or missing request, and says what is switched on', async () => {
      complaints = [];
      await load();
      assert.equal(await page.title(), 'Sign in · Gatehouse console');
      // The page's icon is served (a browser that asks for it gets it, not a 404).
      const icon = await page.locator('link[rel="icon"]').getAttribute('href');
      assert.ok(icon, 'the page names its icon (else the browser asks for /favicon.ico)');
      const iconRes = await page.request.get(new URL(icon, `${base}/console/`).toString());
      assert.equal(iconRes.status(), 200);
      assert.equal(iconRes.headers()['content-type'], 'image/svg+xml');
      assert.deepEqual(complaints, [], 'no 4xx answer and no console error on a signed-out load');

      // The sign-in page names the email flows that are off here and leads to their settings.
      await page.getByText('Off here: magic links.').waitFor();
      await page.getByRole('link', { name: 'What is switched on' }).click();
      await page.getByRole('heading', { name: 'What is switched on', level: 1 }).waitFor();
      const row = (table: string, flow: string) =>
        page.getByRole('table', { name: table }).getByRole('row').filter({ hasText: flow });
      assert.deepEqual(await row('Flows', 'Magic links').getByRole('cell').allTextContents(), [
        'Off',
        'MAGIC_LINK_ENABLED=true',
      ]);
      assert.deepEqual(await row('Flows', 'Activation emails').getByRole('cell').allTextContents(), [
        'On',
        'AUTO_ACTIVATE_NEW_USERS=false',
      ]);
      assert.deepEqual(await row('Sign-in providers', 'GitHub').getByRole('cell').allTextContents(), [
        'Off',
        'GITHUB_ENABLED=truewith GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET',
      ]);
      await shot('switches');
      await unlabelled();
    });

    it('walks sign-up, activation, sign-in, MFA, upload and a password reset', async () => {
      await load();
      assert.equal(await page.title(), 'Sign in · Gatehouse console');
      // The first Tab reaches the skip link, which shows itself when focused.
      await page.keyboard.press('Tab');
      const skip = page.getByRole('link', { name: 'Skip to the page' });
      assert.equal(await skip.evaluate((el) => el === el.ownerDocument.activeElement), true);
      assert.ok(((await skip.boundingBox())?.x ?? -1) >= 0, 'the focused skip link is on screen');

      // Sign up: without auto-activation the account waits for its emailed link.
      const signUp = form('Create an account');
      await signUp.getByLabel('Email').fill(EMAIL);
      await signUp.getByLabel('Password').fill(PASSWORD);
      await signUp.getByRole('button', { name: 'Sign up' }).click();
      await signUp.getByText(`Account created. Follow the activation link emailed to ${EMAIL}.`).waitFor();
      await shot('sign-in');

      // The outbox lists the activation email; its link activates and lands back on the console, signed in.
      await nav('Outbox').click();
      await page.locator('article.message', { hasText: 'activate-account' }).waitFor();
      await shot('outbox');
      await followEmailedLink('activate-account', 'Activate the account');
      await page.getByText('Signed in by the emailed link.').waitFor();
      assert.equal(await page.locator('#session-email').textContent(), EMAIL);
      assert.equal(new URL(page.url()).search, '', 'nothing the link carried stays in the address bar');

      // Sign out; a fresh load is signed out again, and asks for nothing that answers 401.
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await form('Sign in').waitFor();
      complaints = [];
      await load();
      assert.equal(await page.locator('#who').textContent(), 'Signed out');
      assert.deepEqual(complaints, [], 'no 4xx answer and no console error after signing out');

      // Sign in with the password, by keyboard: Tab from the email to the password, Enter.
      await form('Sign in').waitFor();
      await unlabelled();
      await form('Sign in').getByLabel('Email').fill(EMAIL);
      await page.keyboard.press('Tab');
      await page.keyboard.type(PASSWORD);
      await page.keyboard.press('Enter');
      await page.getByText('Signed in.', { exact: true }).waitFor();
      const claims = JSON.parse((await page.locator('pre.claims').textContent()) ?? '{}');
      assert.deepEqual(claims['https://hasura.io/jwt/claims']?.['x-hasura-default-role'], 'user');
      await shot('session');

      // MFA enrolment: the QR code is shown; the secret beside it gives the code an app would.
      await nav('Security').click();
      await form('Set up two-factor sign-in').getByRole('button', { name: 'Set up' }).click();
      const secret = (await page.locator('#otp-secret').textContent()) ?? '';
      assert.match(secret, /^[A-Z2-7]{32}$/);
      const qr = page.getByRole('img', { name: 'QR code to scan with an authenticator app' });
      assert.ok((await naturalWidth(qr)) > 0, 'the QR code loaded');
      const totp = new TOTP({ secret: Secret.fromBase32(secret) });
      await form('Confirm two-factor sign-in').getByLabel('Code from the app').fill(totp.generate());
      await shot('security');
      await unlabelled();
      await form('Confirm two-factor sign-in').getByRole('button', { name: 'Turn on' }).click();
      await page.getByText('Two-factor sign-in is now on.').waitFor();
      // Once on, the page offers to turn it off, never a new secret; a fresh load says the same.
      for (const fresh of [false, true]) {
        if (fresh) await load(`${base}/console/#/security`);
        const mfa = page.locator('.mfa-state');
        await mfa.getByText('Two-factor sign-in is on.').waitFor();
        assert.equal(await mfa.locator('.badge').textContent(), 'On');
        assert.equal(await form('Set up two-factor sign-in').count(), 0, 'no "Set up" once MFA is on');
        assert.equal(await page.locator('#otp-secret').count(), 0, 'no new secret shown');
        await form('Turn two-factor sign-in off').getByRole('button', { name: 'Turn off' }).waitFor();
      }
      await shot('security-mfa-on');

      // Files: upload an image and a text file; the image gets a thumbnail from the transform route.
      await nav('Files').click();
      const upload = form('Upload a file');
      await upload
        .getByLabel('File')
        .setInputFiles({ name: 'sunset.png', mimeType: 'image/png', buffer: await photo() });
      const home = (await upload.getByLabel('Save in').inputValue()) ?? '';
      assert.match(home, /^user\/[0-9a-f-]{36}\/$/, 'uploads go to the own folder by default');
      const userId = home.split('/')[1] as string;
      await upload.getByRole('button', { name: 'Upload' }).click();
      await upload.getByText(`Uploaded sunset.png to ${home}.`).waitFor();
      await upload.getByLabel('File').setInputFiles({
        name: 'notes.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from('remember the milk\n'),
      });
      await upload.getByRole('button', { name: 'Upload' }).click();
      await upload.getByText(`Uploaded notes.txt to ${home}.`).waitFor();
      assert.equal(
        await page.locator('.page > .intro').textContent(),
        `The storage rules let you write files directly in ${home}, or anywhere under public/${userId}/.`,
      );
      const card = page.locator('li.file', { hasText: 'sunset.png' });
      const thumb = card.getByRole('img', { name: 'sunset.png' });
      assert.ok((await naturalWidth(thumb)) > 0, 'the thumbnail loaded');
      const src = new URL((await thumb.getAttribute('src')) ?? '', base);
      assert.equal(src.searchParams.get('w'), '240', 'the thumbnail comes from the transform route');
      // The download link gives the file's own bytes (the request carries the page's session cookie).
      const href = (await card.getByRole('link', { name: 'Download' }).getAttribute('href')) ?? '';
      const downloaded = await page.request.get(new URL(href, base).toString());
      assert.equal(downloaded.status(), 200);
      assert.deepEqual(await downloaded.body(), await photo());
      await card.getByRole('button', { name: 'Metadata' }).click();
      await card.locator('pre.metadata', { hasText: '"ContentType": "image/png"' }).waitFor();
      await shot('files');
      await unlabelled();
      const notes = page.locator('li.file', { hasText: 'notes.txt' });
      await notes.getByRole('button', { name: 'Delete' }).click();
      await notes.locator('.confirm').getByRole('button', { name: 'Delete' }).click();
      await page.getByText('Deleted notes.txt.').waitFor();
      assert.equal(await page.locator('li.file', { hasText: 'notes.txt' }).count(), 0);

      // In public/, which only its owners' folders let them write, an upload goes to public/<id>/.
      const folderForm = form('Open a folder');
      await folderForm.getByLabel('Folder').fill('public/');
      await folderForm.getByRole('button', { name: 'Open' }).click();
      await page.locator('#folder-heading', { hasText: /^public\/$/ }).waitFor();
      assert.equal(await upload.getByLabel('Save in').inputValue(), `public/${userId}/`);
      await upload.getByLabel('File').setInputFiles({
        name: 'hello.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from('hello, world\n'),
      });
      await upload.getByRole('button', { name: 'Upload' }).click();
      await upload.getByText(`Uploaded hello.txt to public/${userId}/.`).waitFor();
      await page.locator('li.file', { hasText: 'hello.txt' }).waitFor();
      // A name the rules refuse (a sub-folder of the own folder): the page says where one may write.
      await upload.getByLabel('Save in').selectOption(home);
      await upload.getByLabel('File').setInputFiles({
        name: 'deep.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from('deep\n'),
      });
      await upload.getByLabel('Save as').fill('deeper/deep.txt');
      await upload.getByRole('button', { name: 'Upload' }).click();
      await upload
        .getByRole('alert')
        .getByText(/no path in the rules allows create here/)
        .waitFor();
      assert.match(
        (await upload.getByRole('alert').textContent()) ?? '',
        new RegExp(
          `\\(FORBIDDEN\\) The storage rules let you write files directly in ${home}, or anywhere under public/${userId}/\\.$`,
        ),
      );
      await shot('files-refused');

      // Lost password: the emailed link opens the console's reset page, which completes the ticket.
      await nav('Session').click();
      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      const lost = form('Forgot your password?');
      await lost.getByLabel('Email').fill(EMAIL);
      await lost.getByRole('button', { name: 'Email me a reset link' }).click();
      await lost.getByText(/a reset link was emailed/).waitFor();
      await followEmailedLink('lost-password', 'Reset the password');
      await form('Choose a new password').waitFor();
      assert.equal(new URL(page.url()).search, '', 'the ticket left the address bar');
      await form('Choose a new password').getByLabel('New password').fill(NEW_PASSWORD);
      await shot('reset');
      await form('Choose a new password').getByRole('button', { name: 'Set password' }).click();
      await page.getByText('Your password was changed').waitFor();

      // Sign in with the new password; MFA asks for a code (the next step's: the enrolment used this one).
      await form('Sign in').getByLabel('Email').fill(EMAIL);
      await form('Sign in').getByLabel('Password').fill(NEW_PASSWORD);
      await form('Sign in').getByRole('button', { name: 'Sign in', exact: true }).click();
      await form('Two-factor code').waitFor();
      assert.equal(await focused(), 'input[code]', 'the code field has focus, ready to type in');
      await page.keyboard.type(totp.generate({ timestamp: Date.now() + 30_000 }));
      await shot('mfa');
      await form('Two-factor code').getByRole('button', { name: 'Continue' }).click();
      await page.getByText('Signed in with two factors.').waitFor();
      assert.equal(await page.locator('#session-email').textContent(), EMAIL);

      // Email change (VERIFY_EMAILS): the link mailed to the new address opens the console's confirmation.
      await nav('Security').click();
      await form('Change email').getByLabel('New email').fill(NEW_EMAIL);
      await form('Change email').getByRole('button', { name: 'Send a confirmation link' }).click();
      await form('Change email').getByText(`A confirmation link was emailed to ${NEW_EMAIL}.`).waitFor();
      await followEmailedLink('change-email', 'Confirm the new email');
      await form('Confirm the new email').waitFor();
      await shot('email-change');
      await form('Confirm the new email').getByRole('button', { name: 'Confirm the new address' }).click();
      await page.getByText('The new address is confirmed').waitFor();
      await nav('Session').click();
      assert.equal(await page.locator('#session-email').textContent(), NEW_EMAIL);

      // The notice to the old address leads to the console, not to a JSON 404.
      complaints = [];
      const notice = await openOutboxAt('notify-email-change');
      assert.match((await notice.locator('.meta').textContent()) ?? '', new RegExp(`^To ${EMAIL} `));
      await notice.getByRole('link', { name: 'Open the application' }).click();
      await page.waitForURL(`${base}/console/`);
      await page.locator('body[data-ready="true"]').waitFor();
      assert.equal(new URL(page.url()).pathname, '/console/');
      assert.equal(await page.title(), 'Session · Gatehouse console');
      assert.deepEqual(complaints, [], 'the notice link answers, and the page asks nothing refused');

      assert.deepEqual(pageProblems, [], 'no script error and nothing the Content-Security-Policy refused');
    });
  });
}
