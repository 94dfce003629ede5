import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

for (const kind of dbKinds()) {
  describe(`health and errors [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind);
    });
    after(() => t.close());

    it('answers GET /health with 204 and no body', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health' });
      assert.equal(res.statusCode, 204);
      assert.equal(res.body, '');
    });

    it('answers GET /healthz with 200 OK (HBP)', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, 'OK');
    });

    it('answers GET /health/ready with 204 while the database answers', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
      assert.equal(res.statusCode, 204);
    });

    it('answers an unknown route with a JSON 404 error body', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/no/such/route' });
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'Not Found',
        code: 'NOT_FOUND',
      });
    });

    it('echoes a sane x-request-id and makes one up otherwise', async () => {
      const given = await t.app.inject({
        method: 'GET',
        url: '/health',
        headers: { 'x-request-id': 'abc-123' },
      });
      assert.equal(given.headers['x-request-id'], 'abc-123');
      const made = await t.app.inject({
        method: 'GET',
        url: '/health',
        headers: { 'x-request-id': 'bad id\u0001' },
      });
      assert.match(String(made.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    });
  });
}
