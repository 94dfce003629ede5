/**
 * Every error answer carries the headers a normal answer carries (helmet's security headers and
 * x-request-id), including those that never reach a route: routing errors, requests Node's HTTP parser
 * refuses, and requests that arrive while the app is closing. Over a real socket, since `inject` skips the
 * HTTP parser and refuses to run once the app closes.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { clientErrorHandler } from '../../src/http/error-handler.ts';
import { securityHeaders } from '../../src/http/security.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

interface RawResponse {
  status: number;
  /** Header lines as sent (name spelling kept), without the status line. */
  lines: string[];
  /** Header names lower-cased. */
  headers: Record<string, string>;
  body: string;
}

/** Parses the responses in `data` one after another; every one must carry a content-length. */
function parseResponses(data: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = data;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end > 0, `incomplete response head: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1]);
    assert.ok(status > 0, `not a status line: ${statusLine}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = end + 4;
    out.push({ status, lines, headers, body: rest.slice(bodyStart, bodyStart + length) });
    rest = rest.slice(bodyStart + length);
  }
  return out;
}

/** A raw connection: what is written goes out as is; `received` resolves with everything read. */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.setEncoding('latin1');
  let data = '';
  socket.on('data', (chunk: string) => {
    data += chunk;
  });
  const received = new Promise<string>((resolve) => {
    // The server may reset a connection whose input it did not read; what arrived before still counts.
    socket.on('error', () => {});
    socket.on('close', () => resolve(data));
  });
  return { socket, received, data: () => data };
}

async function exchange(port: number, request: string): Promise<RawResponse[]> {
  const c = connect(port);
  c.socket.write(request);
  return parseResponses(await c.received);
}

async function get(port: number, path: string, extra = ''): Promise<RawResponse> {
  const [res, ...more] = await exchange(
    port,
    `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${extra}\r\n`,
  );
  assert.equal(more.length, 0);
  assert.ok(res);
  return res;
}

/** The security header lines (as sent) of a response, in order. */
function securityLines(res: RawResponse, t: TestApp): string[] {
  const names = new Set(securityHeaders(t.config).map(([n]) => n));
  return res.lines.filter((l) => names.has(l.slice(0, l.indexOf(':'))));
}

function expectedLines(t: TestApp): string[] {
  return securityHeaders(t.config).map(([n, v]) => `${n}: ${v}`);
}

function assertErrorBody(res: RawResponse, status: number, code: string) {
  assert.equal(res.status, status);
  assert.match(res.headers['content-type'] ?? '', /^application\/json/);
  const body = JSON.parse(res.body);
  assert.equal(body.statusCode, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.error, 'string');
  assert.equal(typeof body.message, 'string');
  assert.ok(body.message.length > 0);
  return body;
}

function holdRoute(app: FastifyInstance, gate: { started: () => void; release: Promise<void> }) {
  app.get('/test/hold', async () => {
    gate.started();
    await gate.release;
    return { held: true };
  });
}

describe('error answers carry the security headers and x-request-id', () => {
  let t: TestApp;
  let port: number;
  before(async () => {
    t = await buildTestApp(
      'pglite',
      {},
      {
        beforeReady: (app) => {
          app.get('/test/p/:id', async (request) => request.params);
        },
      },
    );
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(() => t.close());

  it('a normal answer sends exactly the computed security headers, as helmet spells them', async () => {
    const res = await get(port, '/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(securityLines(res, t), expectedLines(t));
    assert.ok(
      expectedLines(t).includes("Content-Security-Policy: default-src 'none';frame-ancestors 'none';sandbox"),
    );
    assert.equal(res.headers['x-powered-by'], undefined);
  });

  it('a path with broken percent-encoding answers 400 with the error body and every header', async () => {
    const res = await get(port, '/storage/o/%E0%A4%A', 'x-request-id: bad-url-1\r\n');
    assert.deepEqual(JSON.parse(res.body), {
      statusCode: 400,
      error: 'Bad Request',
      message: 'The request path is not a valid URL (bad percent-encoding).',
      code: 'BAD_REQUEST',
    });
    assert.equal(res.status, 400);
    assert.equal(res.headers['content-security-policy'], "default-src 'none';frame-ancestors 'none';sandbox");
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['x-request-id'], 'bad-url-1');
    assert.deepEqual(securityLines(res, t), expectedLines(t));
  });

  it('a routing error makes up an x-request-id when none is given', async () => {
    const res = await get(port, '/%E0%A4%A');
    assertErrorBody(res, 400, 'BAD_REQUEST');
    assert.match(res.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/);
  });

  it('an over-long path parameter answers 414 URI_TOO_LONG with every header', async () => {
    const ok = await get(port, '/test/p/short');
    assert.equal(ok.status, 200, 'the test route works');
    const res = await get(port, `/test/p/${'x'.repeat(500)}`, 'x-request-id: long-1\r\n');
    assertErrorBody(res, 414, 'URI_TOO_LONG');
    assert.equal(res.headers['x-request-id'], 'long-1');
    assert.deepEqual(securityLines(res, t), expectedLines(t));
  });

  it('a 404 has the headers', async () => {
    const res = await get(port, '/no/such/route', 'x-request-id: nf-1\r\n');
    assert.deepEqual(JSON.parse(res.body), {
      statusCode: 404,
      error: 'Not Found',
      message: 'Not Found',
      code: 'NOT_FOUND',
    });
    assert.equal(res.headers['x-request-id'], 'nf-1');
    assert.deepEqual(securityLines(res, t), expectedLines(t));
  });

  it('a malformed request line gets 400 with the error body, the headers, and the connection closed', async () => {
    const [res, ...more] = await exchange(port, 'THIS IS NOT HTTP\r\n\r\n');
    assert.equal(more.length, 0);
    assert.ok(res);
    assert.deepEqual(JSON.parse(res.body), {
      statusCode: 400,
      error: 'Bad Request',
      message: 'The request is not valid HTTP.',
      code: 'BAD_REQUEST',
    });
    assert.equal(res.headers['connection'], 'close');
    assert.equal(res.headers['content-length'], String(Buffer.byteLength(res.body)));
    assert.match(res.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/);
    assert.deepEqual(securityLines(res, t), expectedLines(t));
  });

  it('a malformed header after a good answer on the same keep-alive connection is refused the same way', async () => {
    const c = connect(port);
    c.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await new Promise<void>((resolve) => {
      const check = () => (c.data().includes('\r\n\r\n') ? resolve() : setTimeout(check, 5));
      check();
    });
    c.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n');
    const responses = parseResponses(await c.received);
    assert.deepEqual(
      responses.map((r) => r.status),
      [204, 400],
    );
    assertErrorBody(responses[1] as RawResponse, 400, 'BAD_REQUEST');
    assert.deepEqual(securityLines(responses[1] as RawResponse, t), expectedLines(t));
  });

  it('headers over the size limit get 431 HEADERS_TOO_LARGE', async () => {
    const res = await get(port, '/health', `x-big: ${'a'.repeat(20_000)}\r\n`);
    assert.deepEqual(JSON.parse(res.body), {
      statusCode: 431,
      error: 'Request Header Fields Too Large',
      message: 'The request headers are too large.',
      code: 'HEADERS_TOO_LARGE',
    });
    assert.equal(res.headers['connection'], 'close');
    assert.deepEqual(securityLines(res, t), expectedLines(t));
  });
});

describe('clientErrorHandler on its own', () => {
  const headers = [['X-Test', 'yes']] as const;
  const instance = { log: { debug() {} } } as unknown as FastifyInstance;

  /** A socket stand-in that records what is written, whether it was ended and whether destroyed. */
  function fakeSocket(writable = true) {
    const s = Object.assign(new EventEmitter(), {
      written: '',
      ended: false,
      destroyed: false,
      destroyedWith: undefined as unknown,
      writable,
      write(chunk: string) {
        s.written += chunk;
        return true;
      },
      end() {
        s.ended = true;
      },
      resume() {},
      destroy(err?: unknown) {
        s.destroyed = true;
        s.destroyedWith = err;
      },
    });
    return s;
  }
  const run = (err: Error & { code?: string }, socket: ReturnType<typeof fakeSocket>) =>
    clientErrorHandler(headers).call(instance, err, socket as never);

  it('answers a request timeout with 408 REQUEST_TIMEOUT and closes the socket once the client is done', () => {
    const socket = fakeSocket();
    const err = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
    run(err, socket);
    const [res] = parseResponses(socket.written);
    assert.ok(res);
    assert.equal(res.status, 408);
    assert.equal(JSON.parse(res.body).code, 'REQUEST_TIMEOUT');
    assert.ok(res.lines.includes('X-Test: yes'));
    // A lingering close: our side ends at once, the socket is destroyed once the client's side ends.
    assert.equal(socket.ended, true);
    assert.equal(socket.destroyed, false);
    socket.emit('end');
    assert.equal(socket.destroyed, true);
    socket.emit('close');
  });

  it('writes nothing to a reset or unwritable socket', () => {
    const reset = fakeSocket();
    run(Object.assign(new Error('reset'), { code: 'ECONNRESET' }), reset);
    assert.equal(reset.written, '');
    const closed = fakeSocket(false);
    run(Object.assign(new Error('bad'), { code: 'HPE_INVALID_METHOD' }), closed);
    assert.equal(closed.written, '');
    assert.equal(closed.destroyed, true, 'an unwritable socket is still destroyed');
  });

  it('does not interleave an answer with a response already being sent on the connection', () => {
    const socket = Object.assign(fakeSocket(), { _httpMessage: { headersSent: true } });
    run(Object.assign(new Error('bad'), { code: 'HPE_INVALID_CONSTANT' }), socket);
    assert.equal(socket.written, '');
    assert.equal(socket.destroyed, true);
  });
});

describe('requests arriving while the app closes', () => {
  it('get 503 SHUTTING_DOWN with the error body, the headers and connection: close', async () => {
    let started!: () => void;
    const startedP = new Promise<void>((r) => {
      started = r;
    });
    let release!: () => void;
    const gate = {
      started,
      release: new Promise<void>((r) => {
        release = r;
      }),
    };
    let closingSeen!: () => void;
    const closingP = new Promise<void>((r) => {
      closingSeen = r;
    });
    const t = await buildTestApp(
      'pglite',
      {},
      {
        beforeReady: (app) => {
          holdRoute(app, gate);
          // Registered after the app's own preClose hook, so it runs once the app knows it is closing.
          app.addHook('preClose', (done) => {
            closingSeen();
            done();
          });
        },
      },
    );
    let closed: Promise<void> | undefined;
    try {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const port = (t.app.server.address() as AddressInfo).port;
      const before = await get(port, '/health');
      assert.equal(before.status, 204, 'the app answers before it closes');

      const c = connect(port);
      c.socket.write('GET /test/hold HTTP/1.1\r\nHost: localhost\r\n\r\n');
      await startedP;
      closed = t.app.close();
      await closingP;
      // The next request on the same keep-alive connection, while the first is still running.
      c.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nx-request-id: late-1\r\n\r\n');
      // Give the server time to take the second request in before the first answers.
      await new Promise((r) => setTimeout(r, 100));
      release();
      const [first, second, ...more] = parseResponses(await c.received);
      assert.equal(more.length, 0);
      assert.ok(first && second);
      assert.equal(first.status, 200);
      assert.deepEqual(JSON.parse(first.body), { held: true }, 'the request in flight finishes');
      assert.deepEqual(JSON.parse(second.body), {
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'The server is shutting down; retry the request.',
        code: 'SHUTTING_DOWN',
        requestId: 'late-1',
      });
      assert.equal(second.status, 503);
      assert.equal(second.headers['connection'], 'close');
      assert.equal(second.headers['x-request-id'], 'late-1');
      assert.deepEqual(securityLines(second, t), expectedLines(t));
      await closed;
    } finally {
      release();
      if (!closed) await t.app.close();
      else await closed;
      await t.close();
    }
  });
});
