/**
 * Uploads that go wrong, over real sockets: too large (413), a client that disconnects midway, and an
 * object store that is down (503). None may leave an object, a partial object or a temporary file.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { temporaryFiles } from '../../src/storage/backends/fs.ts';
import type { TestApp } from '../helpers/app.ts';
import { type BackendKind, backendKinds, buildStorageApp, type S3Peer, startS3rver } from './helpers.ts';

const ADMIN = 'faults-admin';
const LIMIT = 1024 * 1024;

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

function post(
  base: string,
  key: string,
  headers: Record<string, string>,
  chunks: Buffer[],
): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: `/storage/o/${key}`,
        headers: { 'x-admin-secret': ADMIN, ...headers },
      },
      (res) => {
        const out: Buffer[] = [];
        res.on('data', (c: Buffer) => out.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(out).toString() }));
      },
    );
    // The server may answer and close before the whole body is sent; that is the point.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    for (const c of chunks) req.write(c);
    req.end();
  });
}

/** Sends the start of an upload on a raw socket, then drops the connection. */
async function abortAfter(
  base: string,
  key: string,
  head: string,
  bytes: number,
  declared: number,
): Promise<void> {
  const u = new URL(base);
  const socket = net.connect(Number(u.port), u.hostname);
  await new Promise((r) => socket.once('connect', r));
  socket.write(
    `POST /storage/o/${key} HTTP/1.1\r\nHost: x\r\nx-admin-secret: ${ADMIN}\r\n${head}Content-Length: ${declared}\r\n\r\n`,
  );
  socket.write(Buffer.alloc(bytes, 7));
  await sleep(300);
  socket.destroy();
}

async function nothingLeft(t: TestApp, key: string, backend: BackendKind): Promise<void> {
  // The server notices the disconnect asynchronously; give it a moment.
  for (let i = 0; i < 50; i++) {
    const meta = await t.app.inject({ url: `/storage/m/${key}`, headers: { 'x-admin-secret': ADMIN } });
    const tmp = backend === 'fs' ? await temporaryFiles(path.join(t.dataDir, 'storage')) : [];
    if (meta.statusCode === 404 && tmp.length === 0) return;
    await sleep(100);
  }
  const meta = await t.app.inject({ url: `/storage/m/${key}`, headers: { 'x-admin-secret': ADMIN } });
  assert.equal(meta.statusCode, 404, `object ${key} is still there`);
  if (backend === 'fs') assert.deepEqual(await temporaryFiles(path.join(t.dataDir, 'storage')), []);
}

for (const backend of backendKinds as BackendKind[]) {
  describe(`upload faults [${backend}]`, () => {
    let t: TestApp;
    let base: string;
    before(async () => {
      t = await buildStorageApp(backend, peer, {
        HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
        STORAGE_MAX_UPLOAD_SIZE: LIMIT,
      });
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => t.close());

    it('answers 413 at once to a raw body declared larger than STORAGE_MAX_UPLOAD_SIZE, storing nothing', async () => {
      const res = await post(
        base,
        'public/declared.bin',
        { 'content-type': 'application/octet-stream', 'content-length': String(2 * LIMIT) },
        [Buffer.alloc(2 * LIMIT)],
      );
      assert.equal(res.status, 413);
      assert.equal(JSON.parse(res.body).code, 'PAYLOAD_TOO_LARGE');
      await nothingLeft(t, 'public/declared.bin', backend);
    });

    it('answers 413 to a chunked raw body that grows past the limit, storing nothing', async () => {
      const res = await post(
        base,
        'public/chunked.bin',
        { 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
        [Buffer.alloc(LIMIT / 2), Buffer.alloc(LIMIT / 2), Buffer.alloc(LIMIT / 2)],
      );
      assert.equal(res.status, 413);
      await nothingLeft(t, 'public/chunked.bin', backend);
    });

    it('answers 413 to a multipart file past the limit, keeping an older version intact', async () => {
      const small = await post(base, 'public/mp.bin', { 'content-type': 'text/plain' }, [
        Buffer.from('original'),
      ]);
      assert.equal(small.status, 200);
      const boundary = 'xXx';
      const res = await post(
        base,
        'public/mp.bin',
        { 'content-type': `multipart/form-data; boundary=${boundary}` },
        [
          Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n`),
          Buffer.alloc(LIMIT + 10),
          Buffer.from(`\r\n--${boundary}--\r\n`),
        ],
      );
      assert.equal(res.status, 413);
      const got = await t.app.inject({ url: '/storage/o/public/mp.bin' });
      assert.equal(got.body, 'original');
      if (backend === 'fs') assert.deepEqual(await temporaryFiles(path.join(t.dataDir, 'storage')), []);
    });

    it('accepts a file of exactly the limit', async () => {
      const res = await post(base, 'public/exact.bin', { 'content-type': 'application/octet-stream' }, [
        Buffer.alloc(LIMIT, 1),
      ]);
      assert.equal(res.status, 200);
      assert.equal(JSON.parse(res.body).ContentLength, LIMIT);
    });

    it('answers 400 BAD_REQUEST, storing nothing, to a complete multipart body the parser cannot read', async () => {
      const part = `--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n`;
      const cases: [string, string, Buffer[]][] = [
        ['no boundary', 'multipart/form-data', [Buffer.from(part), Buffer.from('bytes\r\n--b--\r\n')]],
        // The body ends inside the file: before the first bytes were sniffed, and while the store writes.
        ['cut in the head', 'multipart/form-data; boundary=b', [Buffer.from(part), Buffer.from('short')]],
        ['cut in the body', 'multipart/form-data; boundary=b', [Buffer.from(part), Buffer.alloc(200_000, 7)]],
      ];
      for (const [what, type, chunks] of cases) {
        const key = `public/malformed-${what.replaceAll(' ', '-')}.bin`;
        const length = chunks.reduce((n, c) => n + c.length, 0);
        const res = await post(base, key, { 'content-type': type, 'content-length': String(length) }, chunks);
        assert.equal(res.status, 400, `${what}: ${res.body}`);
        assert.equal(JSON.parse(res.body).code, 'BAD_REQUEST', what);
        assert.match(JSON.parse(res.body).message, /^The multipart body is malformed/, what);
        await nothingLeft(t, key, backend);
      }
    });

    it('leaves nothing when a raw upload is cut off midway', async () => {
      await abortAfter(
        base,
        'public/cut-raw.bin',
        'Content-Type: application/octet-stream\r\n',
        300_000,
        900_000,
      );
      await nothingLeft(t, 'public/cut-raw.bin', backend);
    });

    it('leaves nothing when a multipart upload is cut off midway', async () => {
      const head =
        '--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\nContent-Type: application/octet-stream\r\n\r\n';
      const u = new URL(base);
      const socket = net.connect(Number(u.port), u.hostname);
      await new Promise((r) => socket.once('connect', r));
      socket.write(
        `POST /storage/o/public/cut-mp.bin HTTP/1.1\r\nHost: x\r\nx-admin-secret: ${ADMIN}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 900000\r\n\r\n${head}`,
      );
      socket.write(Buffer.alloc(300_000, 7));
      await sleep(300);
      socket.destroy();
      await nothingLeft(t, 'public/cut-mp.bin', backend);
    });
  });
}

describe('object store outage [s3]', () => {
  let t: TestApp;
  before(async () => {
    t = await buildStorageApp('s3', peer, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN });
  });
  after(async () => {
    await peer.start().catch(() => {});
    await t.close();
  });

  it('answers 503 with a clear message and reports it on /health/ready, then recovers', async () => {
    const up = await t.app.inject({
      method: 'POST',
      url: '/storage/o/public/a.txt',
      payload: 'a',
      headers: { 'content-type': 'text/plain', 'x-admin-secret': ADMIN },
    });
    assert.equal(up.statusCode, 200);
    await peer.stop();
    try {
      const res = await t.app.inject({ url: '/storage/o/public/a.txt' });
      assert.equal(res.statusCode, 503);
      assert.equal(res.json().code, 'STORAGE_UNAVAILABLE');
      assert.equal(res.json().message, 'The object store is unavailable.');
      assert.equal(res.headers['retry-after'], '5', 'a dependency outage says when to come back');
      const ready = await t.app.inject({ url: '/health/ready' });
      assert.equal(ready.statusCode, 503);
      assert.match(ready.json().message, /storage/);
      const write = await t.app.inject({
        method: 'POST',
        url: '/storage/o/public/b.txt',
        payload: 'b',
        headers: { 'content-type': 'text/plain' },
      });
      assert.equal(write.statusCode, 503);
    } finally {
      await peer.start();
    }
    assert.equal((await t.app.inject({ url: '/health/ready' })).statusCode, 204);
    assert.equal((await t.app.inject({ url: '/storage/o/public/a.txt' })).statusCode, 200);
  });
});
