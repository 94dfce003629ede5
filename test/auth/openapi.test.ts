import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { HS } from './helpers.ts';

describe('auth routes in /openapi.json', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, ALLOW_USER_SELF_DELETE: true });
  });
  after(() => t.close());

  it('describes every auth route with its request and response schemas', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    const paths = res.json().paths as Record<
      string,
      Record<string, { responses: Record<string, unknown>; requestBody?: unknown; parameters?: unknown[] }>
    >;
    const expected: [string, string][] = [
      ['/auth/register', 'post'],
      ['/auth/login', 'post'],
      ['/auth/logout', 'post'],
      ['/auth/activate', 'get'],
      ['/auth/token/refresh', 'get'],
      ['/auth/token/revoke', 'post'],
      ['/auth/change-password', 'post'],
      ['/auth/change-email', 'post'],
      ['/auth/delete', 'post'],
      ['/auth/jwks', 'get'],
    ];
    for (const [path, method] of expected) {
      const op = paths[path]?.[method];
      assert.ok(op, `${method.toUpperCase()} ${path} is documented`);
      assert.ok(
        Object.keys(op.responses).some((s) => s.startsWith('2') || s === '302'),
        `${path} success response`,
      );
      if (method === 'post') assert.ok(op.requestBody, `${path} request body`);
    }
    assert.ok(paths['/auth/activate']?.get?.parameters?.length, 'activate query parameters');
  });
});
