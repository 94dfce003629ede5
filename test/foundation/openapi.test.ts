/**
 * GET /openapi.json is a valid OpenAPI 3 document (checked by a real validator) that lists every route
 * the app registers, with every feature switched on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteOptions } from 'fastify';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

/** Fastify's `/o/:key/*` spelled the way the OpenAPI document spells it. */
function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{*}');
}

describe('GET /openapi.json', () => {
  let t: TestApp;
  const routes: RouteOptions[] = [];
  let doc: { openapi: string; paths: Record<string, Record<string, unknown>> };

  before(async () => {
    // The document does not depend on the database; PGlite is enough.
    t = await buildTestApp(
      'pglite',
      {
        AUTH_ENABLED: true,
        STORAGE_ENABLED: true,
        MFA_ENABLED: true,
        CHANGE_EMAIL_ENABLED: true,
        LOST_PASSWORD_ENABLED: true,
        MAGIC_LINK_ENABLED: true,
        EMAIL_OTP_ENABLED: true,
        ANONYMOUS_USERS_ENABLED: true,
        ALLOW_USER_SELF_DELETE: true,
        USER_IMPERSONATION_ENABLED: true,
        VERIFY_EMAILS: true,
      },
      { onRoute: (r) => routes.push(r) },
    );
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    doc = res.json();
  });
  after(() => t.close());

  it('is a valid OpenAPI 3 document', async () => {
    assert.match(doc.openapi, /^3\./);
    const result = await new Validator().validate(doc as never);
    assert.deepEqual(result.errors ?? [], []);
    assert.equal(result.valid, true);
  });

  it('lists every registered route and method (HEAD aside), and only /openapi.json, / and the console, and /docs are hidden', () => {
    const hidden: string[] = [];
    const missing: string[] = [];
    let listed = 0;
    for (const r of routes) {
      const methods = (Array.isArray(r.method) ? r.method : [r.method]).filter((m) => m !== 'HEAD');
      for (const method of methods) {
        const name = `${method} ${r.url}`;
        if ((r.schema as { hide?: boolean } | undefined)?.hide) {
          hidden.push(name);
          continue;
        }
        const entry = doc.paths[openapiPath(r.url)]?.[method.toLowerCase()];
        if (entry) listed++;
        else missing.push(name);
      }
    }
    assert.deepEqual(missing, []);
    // The document itself, the CORS preflight catch-all of @fastify/cors, the development console's page
    // and its own JSON (no API: test/console/routes.test.ts) with `/`, which leads there outside
    // production, and the API reference's page and files.
    assert.deepEqual(hidden.filter((name) => !/^GET \/(console|docs)(\/|$)/.test(name)).sort(), [
      'GET /',
      'GET /openapi.json',
      'OPTIONS *',
    ]);
    assert.ok(listed >= 4, 'at least the health routes are listed');
  });

  it('declares a response schema for every operation (none falls back to "Default Response")', () => {
    const undeclared: string[] = [];
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        // What @fastify/swagger writes for a route without any response schema.
        const generated = { 200: { description: 'Default Response' } };
        if (isDeepStrictEqual((op as { responses?: unknown }).responses, generated)) {
          undeclared.push(`${method.toUpperCase()} ${p}`);
        }
      }
    }
    assert.deepEqual(undeclared, []);
  });
});
