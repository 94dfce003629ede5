import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../../src/errors.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';

/** Routes that exist only in these tests, to reach the error paths every real route shares. */
function testRoutes(app: FastifyInstance) {
  app.post(
    '/test/echo',
    {
      schema: {
        body: Type.Object({ name: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
      },
    },
    async (request) => request.body,
  );
  app.get('/test/crash', async () => {
    throw new Error('connect ECONNREFUSED 10.0.0.7:5432 password=hunter2');
  });
  app.get('/test/db-crash', async () => {
    const { ctx } = t;
    await ctx.db.query('test-broken-query', 'SELECT * FROM no_such_table_with_secret_name');
    return {};
  });
  app.get('/test/unavailable', async () => {
    throw new AppError('SERVICE_UNAVAILABLE', undefined, { cause: new Error('smtp down at 10.0.0.9') });
  });
}

let t: TestApp;
const ERROR_KEYS = ['code', 'error', 'message', 'statusCode'];

for (const kind of dbKinds()) {
  describe(`health and errors [${kind}]`, () => {
    before(async () => {
      t = await buildTestApp(kind, {}, { beforeReady: testRoutes });
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

    it('answers an unknown method on a known path with the JSON 404 body', async () => {
      const res = await t.app.inject({ method: 'DELETE', url: '/health' });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'NOT_FOUND');
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

    const post = (payload: string | object | undefined, contentType?: string) =>
      t.app.inject({
        method: 'POST',
        url: '/test/echo',
        payload,
        headers: contentType ? { 'content-type': contentType } : {},
      });

    it('accepts a valid JSON body (the test route works)', async () => {
      const res = await post({ name: 'ada' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { name: 'ada' });
    });

    it('returns 400 INVALID_JSON for malformed JSON', async () => {
      const res = await post('{"name": ', 'application/json');
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The request body is not valid JSON.',
        code: 'INVALID_JSON',
      });
    });

    it('takes an empty body announced as JSON for no body: a route that needs one answers as to a bare POST', async () => {
      const res = await post('', 'application/json');
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), (await post(undefined)).json());
      assert.equal(res.json().code, 'VALIDATION');
    });

    it('returns 400 VALIDATION when a route that needs a body gets none', async () => {
      const res = await post(undefined);
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The request body must be of type object',
        code: 'VALIDATION',
      });
    });

    it('returns 400 VALIDATION for JSON that is not an object', async () => {
      for (const body of ['[]', 'null', '"text"', '42']) {
        const res = await post(body, 'application/json');
        assert.equal(res.statusCode, 400, body);
        assert.equal(res.json().code, 'VALIDATION', body);
      }
    });

    it('returns 415 naming the content type for text/plain, form and XML bodies', async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
        const res = await post('name=ada', type);
        assert.equal(res.statusCode, 415, type);
        assert.deepEqual(res.json(), {
          statusCode: 415,
          error: 'Unsupported Media Type',
          message: `Unsupported content type: ${type}. Send application/json.`,
          code: 'UNSUPPORTED_MEDIA_TYPE',
        });
      }
    });

    it('does not echo a content-type header that is not a media type', async () => {
      const res = await post('x', '<script>alert(1)</script>');
      assert.equal(res.statusCode, 415);
      assert.equal(res.json().message, 'Unsupported or missing content type. Send application/json.');
    });

    it('returns 413 PAYLOAD_TOO_LARGE for a body over BODY_LIMIT', async () => {
      const res = await post(JSON.stringify({ name: 'x'.repeat(t.config.BODY_LIMIT) }), 'application/json');
      assert.equal(res.statusCode, 413);
      assert.deepEqual(res.json(), {
        statusCode: 413,
        error: 'Payload Too Large',
        message: 'The request body is too large.',
        code: 'PAYLOAD_TOO_LARGE',
      });
    });

    it('returns 400 when Content-Length does not match the body', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/test/echo',
        payload: '{"name":"ada"}',
        headers: { 'content-type': 'application/json', 'content-length': '3' },
      });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(Object.keys(res.json()).sort(), ERROR_KEYS);
    });

    it('returns 400 for a JSON body that tries prototype pollution', async () => {
      const res = await post('{"__proto__": {"admin": true}, "name": "a"}', 'application/json');
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().code, 'INVALID_JSON');
    });

    it('returns 400 VALIDATION naming a missing field or an unknown one', async () => {
      const missing = await post({});
      assert.equal(missing.statusCode, 400);
      assert.equal(missing.json().message, '"name" is required');
      const unknown = await post({ name: 'a', admin: true });
      assert.equal(unknown.statusCode, 400);
      assert.equal(unknown.json().message, '"admin" is not allowed');
    });

    it('returns 400 with the error body for a path with broken percent-encoding', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/%E0%A4%A' });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The request path is not a valid URL (bad percent-encoding).',
        code: 'BAD_REQUEST',
      });
    });

    for (const [route, leak] of [
      ['/test/crash', /ECONNREFUSED|hunter2|10\.0\.0\.7/],
      ['/test/db-crash', /no_such_table|test-broken-query|SELECT/],
    ] as const) {
      it(`returns 500 with the request id and no internals when ${route} throws`, async () => {
        const res = await t.app.inject({ method: 'GET', url: route, headers: { 'x-request-id': 'req-500' } });
        assert.equal(res.statusCode, 500);
        assert.deepEqual(res.json(), {
          statusCode: 500,
          error: 'Internal Server Error',
          message: 'An internal server error occurred.',
          code: 'INTERNAL',
          requestId: 'req-500',
        });
        assert.doesNotMatch(res.body, leak);
      });
    }

    it('returns a catalogued 5xx AppError with its own message and the request id, not its cause', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/test/unavailable' });
      assert.equal(res.statusCode, 503);
      const body = res.json();
      assert.equal(body.code, 'SERVICE_UNAVAILABLE');
      assert.equal(body.requestId, res.headers['x-request-id']);
      assert.doesNotMatch(res.body, /smtp|10\.0\.0\.9/);
    });

    // Last: it closes the database under the app.
    it('answers GET /health/ready with 503 naming the database when it cannot be reached', async () => {
      await t.ctx.db.close();
      const res = await t.app.inject({
        method: 'GET',
        url: '/health/ready',
        headers: { 'x-request-id': 'r-1' },
      });
      assert.equal(res.statusCode, 503);
      assert.deepEqual(res.json(), {
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'Unavailable: database.',
        code: 'SERVICE_UNAVAILABLE',
        requestId: 'r-1',
      });
      const live = await t.app.inject({ method: 'GET', url: '/health' });
      assert.equal(live.statusCode, 204, 'liveness does not depend on the database');
    });
  });
}
