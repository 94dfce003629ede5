/**
 * The API reference at /docs: Swagger UI drawn in a real browser (Debian's Chromium driven by
 * playwright-core) from the service's own files, every request on 127.0.0.1, no console error and no
 * refusal by the Content-Security-Policy, a switched-off route shown with its setting; photographed into
 * docs/console/api-reference.png. Over inject:
 * the page keeps its relaxed policy to itself, and production serves no /docs unless told to.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp, tempDir } from '../helpers/app.ts';
import { REPO_ROOT } from '../helpers/process.ts';
import { runsHere } from '../helpers/requirements.ts';
import { keepScreenshot } from '../helpers/screenshots.ts';

const SHOT = path.join(REPO_ROOT, 'docs/console/api-reference.png');
const PRODUCTION = {
  ...HS,
  NODE_ENV: 'production',
  // The test helper passes its own database; the URL only satisfies the production check.
  DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
  COOKIE_SECRET: 'c'.repeat(32),
  MFA_ENCRYPTION_KEY: 'm'.repeat(32),
} as const;

/** The chromium binary on PATH (what `which chromium` names). */
function chromiumPath(): string {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'chromium');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('chromium is not on PATH');
}

describe('GET /docs', () => {
  it('is 404 in production by default, and served there when API_REFERENCE_ENABLED=true', async () => {
    const off = await buildTestApp('pglite', PRODUCTION);
    try {
      for (const url of ['/docs', '/docs/', '/docs/static/swagger-ui-bundle.js', '/docs/json']) {
        const res = await off.app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 404, url);
        assert.equal(res.json().code, 'NOT_FOUND', url);
      }
      // The document itself stays public.
      assert.equal((await off.app.inject({ method: 'GET', url: '/openapi.json' })).statusCode, 200);
    } finally {
      await off.close();
    }
    const on = await buildTestApp('pglite', { ...PRODUCTION, API_REFERENCE_ENABLED: true });
    try {
      const res = await on.app.inject({ method: 'GET', url: '/docs' });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/html/);
    } finally {
      await on.close();
    }
  });

  it('relaxes the Content-Security-Policy for its own routes only', async () => {
    const t = await buildTestApp('pglite');
    try {
      const page = await t.app.inject({ method: 'GET', url: '/docs' });
      assert.equal(page.statusCode, 200);
      const csp = String(page.headers['content-security-policy']);
      assert.match(csp, /script-src 'self'(;|$)/, 'scripts from this origin only, none inline');
      assert.match(csp, /style-src 'self'(;|$)/, 'styles from this origin only, none inline');
      assert.doesNotMatch(csp, /https:|\*/, 'nothing from another origin');
      const bundle = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
      assert.equal(bundle.statusCode, 200);
      assert.equal(bundle.headers['content-security-policy'], csp);
      for (const url of ['/openapi.json', '/healthz', '/docsx', '/nowhere']) {
        const other = await t.app.inject({ method: 'GET', url });
        assert.match(String(other.headers['content-security-policy']), /default-src 'none'.*sandbox/, url);
      }
    } finally {
      await t.close();
    }
  });
});

if (runsHere('chromium', 'the API reference in headless Chromium')) {
  describe('the API reference in Chromium', () => {
    let t: TestApp;
    let profile: string;
    let context: BrowserContext;
    let page: Page;
    let base: string;
    const problems: string[] = [];
    const elsewhere: string[] = [];

    before(async () => {
      t = await buildTestApp('pglite', { STORAGE_ENABLED: true });
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
      profile = tempDir('gatehouse-chromium-');
      context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath(),
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
        viewport: { width: 1000, height: 700 },
        locale: 'en-GB',
        timezoneId: 'UTC',
      });
      page = context.pages()[0] ?? (await context.newPage());
      page.setDefaultTimeout(20_000);
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => {
        if (msg.type() === 'error' || /Content.Security.Policy|Refused to/i.test(msg.text()))
          problems.push(`console ${msg.type()}: ${msg.text()}`);
      });
      page.on('response', (res) => {
        if (res.status() >= 400) problems.push(`${res.status()} ${res.request().method()} ${res.url()}`);
      });
      // Every request the page makes, data: images aside, must stay on this machine.
      page.on('request', (req) => {
        const url = new URL(req.url());
        if (url.protocol !== 'data:' && url.hostname !== '127.0.0.1') elsewhere.push(req.url());
      });
    });

    after(async () => {
      await context?.close();
      await t?.close();
      if (profile) rmSync(profile, { recursive: true, force: true });
    });

    it('draws the routes from the service alone, with no console error', async () => {
      await page.goto(`${base}/docs`);
      await page.locator('.swagger-ui .info .title', { hasText: 'Gatehouse' }).waitFor();
      const paths = page.locator('.opblock-summary-path');
      await paths.first().waitFor();
      const shown = await paths.evaluateAll((els) => els.map((el) => el.getAttribute('data-path')));
      for (const route of [
        '/auth/login',
        '/auth/register',
        '/auth/token/refresh',
        '/storage/o/{*}',
        '/healthz',
      ])
        assert.ok(shown.includes(route), `${route} is shown (${shown.length} paths)`);
      // Opening an operation shows its schema: the page works, not only draws.
      await page.locator('.opblock-summary-path[data-path="/auth/login"]').first().click();
      await page.locator('.opblock.is-open .opblock-section-header', { hasText: 'Request body' }).waitFor();
      // A route switched off here is listed with the setting that turns it on.
      await page.locator('.opblock-summary-path[data-path="/auth/change-password/request"]').first().click();
      const note = page.getByText('Switched off here: set LOST_PASSWORD_ENABLED=true.').first();
      await note.waitFor();
      // The picture shows that route opened: its summary, the note and the start of its schema.
      await page
        .locator('.opblock-summary-path[data-path="/auth/change-password/request"]')
        .first()
        .evaluate((el) => (el as unknown as { scrollIntoView(): void }).scrollIntoView());
      await page.evaluate('window.scrollBy(0, -60)');
      const png = await page.screenshot({ type: 'png', caret: 'hide', animations: 'disabled' });
      assert.ok(png.length < 200_000, `api-reference.png is ${png.length} bytes`);
      mkdirSync(path.dirname(SHOT), { recursive: true });
      await keepScreenshot(SHOT, png);
      assert.deepEqual(elsewhere, [], 'no request left 127.0.0.1');
      assert.deepEqual(problems, [], 'no failed request, script error or CSP refusal');
    });
  });
}
