/**
 * docs/providers.md's walk-through, as a test: the local provider of `npm run oidc-dev` and a Gatehouse
 * configured as that page says; a browser signs in with a name typed into the provider's login page
 * and ends with a session (as JSON: the walk-through sets no REDIRECT_URL_SUCCESS).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEV_CLIENT, type DevProvider, startDevProvider } from '../../scripts/oidc-dev-provider.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { Browser, type Page } from '../helpers/browser.ts';

const GATEHOUSE = 'http://localhost:3000';

/** The action of the page's form, as a browser would resolve it. */
function formAction(page: Page): string {
  const m = /<form[^>]*action="([^"]+)"/.exec(page.body);
  assert.ok(m, `no form on ${page.url}: ${page.body.slice(0, 200)}`);
  return new URL(m[1] as string, page.url).toString();
}

describe('walk-through: sign in with the local OpenID Connect provider', () => {
  let dev: DevProvider;
  let t: TestApp;
  before(async () => {
    dev = await startDevProvider({ port: 0, host: '127.0.0.1', gatehouse: GATEHOUSE });
    t = await buildTestApp('pglite', {
      SERVER_URL: GATEHOUSE,
      OIDC_ENABLED: true,
      OIDC_ISSUER: dev.issuer,
      OIDC_CLIENT_ID: DEV_CLIENT.client_id,
      OIDC_CLIENT_SECRET: DEV_CLIENT.client_secret,
    });
  });
  after(async () => {
    await t?.close();
    await dev?.close();
  });

  it('opens /auth/providers/oidc, types a name at the provider, consents, and gets a session', async () => {
    const browser = new Browser(t.app, GATEHOUSE);
    const login = await browser.go(`${GATEHOUSE}/auth/providers/oidc`);
    assert.equal(login.status, 200);
    assert.match(login.body, /name="login"/);
    const consent = await browser.go(formAction(login), {
      method: 'POST',
      form: { prompt: 'login', login: 'ada', password: 'any' },
    });
    assert.equal(consent.status, 200, consent.body.slice(0, 300));
    const done = await browser.go(formAction(consent), { method: 'POST', form: { prompt: 'consent' } });
    assert.equal(done.status, 200, done.body);
    const session = JSON.parse(done.body);
    assert.equal(session.user.email, 'ada@example.com');
    assert.equal(session.user.display_name, 'Ada');
    assert.ok(session.jwt_token);
  });
});
