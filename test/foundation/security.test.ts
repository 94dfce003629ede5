/**
 * Security headers and CORS. CORS answers with credentials, so an origin is reflected only when it is
 * allowed: by CORS_ORIGINS, or (unset, outside production) when it is localhost. HBP reflected any origin.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';

const PRODUCTION: ConfigOverrides = {
  NODE_ENV: 'production',
  // The test helper passes its own database; the URL only satisfies the production check.
  DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
  COOKIE_SECRET: 'c'.repeat(32),
  MFA_ENCRYPTION_KEY: 'm'.repeat(32),
  JWT_ALGORITHM: 'HS256',
  JWT_KEY: 'k'.repeat(64),
};

function preflight(t: TestApp, origin: string) {
  return t.app.inject({
    method: 'OPTIONS',
    url: '/health',
    headers: { origin, 'access-control-request-method': 'POST' },
  });
}

function simple(t: TestApp, origin: string) {
  return t.app.inject({ method: 'GET', url: '/health', headers: { origin } });
}

describe('CORS and headers, development defaults (CORS_ORIGINS unset)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite');
  });
  after(() => t.close());

  it('reflects a localhost origin with credentials, on any port', async () => {
    for (const origin of ['http://localhost:5173', 'http://127.0.0.1:3001', 'http://localhost']) {
      const res = await preflight(t, origin);
      assert.equal(res.statusCode, 204, origin);
      assert.equal(res.headers['access-control-allow-origin'], origin);
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.match(String(res.headers['access-control-allow-methods']), /POST/);
    }
  });

  it('does not reflect any other origin, and never answers with *', async () => {
    for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null']) {
      const res = await simple(t, origin);
      assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
      const pre = await preflight(t, origin);
      assert.equal(pre.headers['access-control-allow-origin'], undefined, origin);
    }
  });

  it('sends security headers and no x-powered-by; no HSTS outside production', async () => {
    const res = await simple(t, 'http://localhost:3000');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['x-frame-options'], 'SAMEORIGIN');
    assert.match(String(res.headers['content-security-policy']), /default-src 'none'/);
    assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
    assert.equal(res.headers['x-powered-by'], undefined);
    assert.equal(res.headers['strict-transport-security'], undefined);
  });
});

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none';frame-ancestors 'none';sandbox",
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'cross-origin',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'x-frame-options': 'SAMEORIGIN',
  'x-permitted-cross-domain-policies': 'none',
  'x-xss-protection': '0',
};

describe('security headers on every kind of answer', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite');
  });
  after(() => t.close());

  for (const [what, req] of [
    ['a 204', { method: 'GET', url: '/health' }],
    ['a 404', { method: 'GET', url: '/nowhere' }],
    ['a 400', { method: 'GET', url: '/storage/m/a%5Cb' }],
    ['a 403', { method: 'GET', url: '/storage/m/user/someone/f.txt' }],
    ['a 401', { method: 'GET', url: '/storage/m/x', headers: { authorization: 'Bearer a.b.c' } }],
    [
      'a preflight',
      {
        method: 'OPTIONS',
        url: '/storage/m/x',
        headers: { origin: 'http://localhost:1', 'access-control-request-method': 'GET' },
      },
    ],
  ] as const) {
    it(`sends helmet's exact set on ${what}`, async () => {
      const res = await t.app.inject(req as never);
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
        assert.equal(res.headers[name], value, `${name} on ${what}`);
      }
      assert.equal(res.headers['strict-transport-security'], undefined);
    });
  }
});

describe('CORS with CORS_ORIGINS', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { CORS_ORIGINS: ['https://app.example.com', 'https://*.example.org'] });
  });
  after(() => t.close());

  it('refuses an OPTIONS request from a listed origin that is not a preflight with the JSON error body', async () => {
    const res = await t.app.inject({
      method: 'OPTIONS',
      url: '/auth/login',
      headers: { origin: 'https://app.example.com' },
    });
    assert.equal(res.statusCode, 400);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.json().code, 'BAD_REQUEST');
    assert.match(res.json().message, /Access-Control-Request-Method/);
  });

  it('reflects exactly the listed origins and wildcard subdomains', async () => {
    for (const origin of ['https://app.example.com', 'https://a.example.org', 'https://a.b.example.org']) {
      const res = await preflight(t, origin);
      assert.equal(res.headers['access-control-allow-origin'], origin, origin);
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
    }
  });

  it('refuses look-alikes, other schemes and localhost once a list is set', async () => {
    for (const origin of [
      'http://app.example.com',
      'https://app.example.com.evil.io',
      'https://evil.io/.example.org',
      'https://example.org',
      'http://localhost:5173',
    ]) {
      const res = await preflight(t, origin);
      assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
    }
  });
});

describe('CORS and headers in production', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', PRODUCTION);
  });
  after(() => t.close());

  it('reflects no origin at all when CORS_ORIGINS is unset, not even localhost', async () => {
    const res = await preflight(t, 'http://localhost:5173');
    assert.equal(res.headers['access-control-allow-origin'], undefined);
  });

  it('sends HSTS', async () => {
    const res = await simple(t, 'https://app.example.com');
    assert.match(String(res.headers['strict-transport-security']), /max-age=\d+; includeSubDomains/);
  });
});

describe("the OAuth server's browser-facing endpoints answer any origin, without credentials", () => {
  let t: TestApp;
  const SPA = 'https://inspector.example';
  before(async () => {
    t = await buildTestApp('pglite', {
      JWT_ALGORITHM: 'ES256',
      SERVER_URL: 'https://auth.example.com',
      CORS_ORIGINS: ['https://app.example.com'],
      OAUTH_SERVER_ENABLED: true,
      OAUTH_DYNAMIC_REGISTRATION: true,
      OAUTH_RESOURCES: ['https://mcp.example.com/mcp'],
    });
  });
  after(() => t.close());

  for (const [method, url] of [
    ['GET', '/.well-known/oauth-authorization-server'],
    ['GET', '/.well-known/openid-configuration'],
    ['GET', '/auth/jwks'],
    ['POST', '/auth/oauth2/token'],
    ['POST', '/auth/oauth2/revoke'],
    ['POST', '/auth/oauth2/register'],
    ['GET', '/auth/oauth2/userinfo'],
  ] as const) {
    it(`${method} ${url}: a preflight and the answer (an error included) allow *, never credentials`, async () => {
      const pre = await t.app.inject({
        method: 'OPTIONS',
        url,
        headers: {
          origin: SPA,
          'access-control-request-method': method,
          'access-control-request-headers': 'content-type, authorization',
        },
      });
      assert.equal(pre.statusCode, 204);
      assert.equal(pre.headers['access-control-allow-origin'], '*');
      assert.equal(pre.headers['access-control-allow-credentials'], undefined);
      assert.match(String(pre.headers['access-control-allow-headers']), /content-type/);
      const res = await t.app.inject({
        method,
        url,
        headers: { origin: SPA, 'content-type': 'application/x-www-form-urlencoded' },
        payload: method === 'POST' ? 'grant_type=authorization_code&code=nope' : undefined,
      });
      assert.equal(res.headers['access-control-allow-origin'], '*', `${res.statusCode} ${res.body}`);
      assert.equal(res.headers['access-control-allow-credentials'], undefined);
    });
  }

  it('every other route keeps the listed origins: a sign-in or the authorize page answers the page nothing', async () => {
    for (const [method, url] of [
      ['POST', '/auth/login'],
      ['GET', '/auth/oauth2/authorize'],
      ['POST', '/auth/oauth2/introspect'],
      ['GET', '/auth/user'],
    ] as const) {
      const pre = await t.app.inject({
        method: 'OPTIONS',
        url,
        headers: { origin: SPA, 'access-control-request-method': method },
      });
      assert.equal(pre.headers['access-control-allow-origin'], undefined, url);
      const listed = await t.app.inject({
        method: 'OPTIONS',
        url,
        headers: { origin: 'https://app.example.com', 'access-control-request-method': method },
      });
      assert.equal(listed.headers['access-control-allow-origin'], 'https://app.example.com', url);
      assert.equal(listed.headers['access-control-allow-credentials'], 'true', url);
    }
  });
});
