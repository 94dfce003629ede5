/**
 * A 200 MB upload and download through the real HTTP server, on both backends: the bytes come back
 * exact (sha256) and the server process's resident memory grows by less than 64 MB. The server runs in a
 * child process so the figure is the server's alone; the test streams generated data and never holds
 * the file in memory either.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { tempDir } from '../helpers/app.ts';
import { type BackendKind, backendKinds, type S3Peer, startS3rver, uniqueBucket } from './helpers.ts';

const SIZE = 200 * 1024 * 1024;
const BLOCK = 1024 * 1024;
const LIMIT = 64 * 1024 * 1024;
const ADMIN = 'large-upload-admin';

type Message = { type: string; address?: string; baseline?: number; peak?: number };

function startServer(overrides: Record<string, unknown>): Promise<{ child: ChildProcess; address: string }> {
  const child = fork(new URL('./fixtures/upload-server.ts', import.meta.url), [JSON.stringify(overrides)], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (m: Message) => resolve({ child, address: m.address as string }));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
}

function ask(child: ChildProcess, what: string): Promise<Message> {
  return new Promise((resolve) => {
    child.once('message', (m: Message) => resolve(m));
    child.send(what);
  });
}

/** 200 MB of varied bytes, generated block by block; returns the sha256 of what it produced. */
function* blocks(hash: ReturnType<typeof createHash>): Generator<Buffer> {
  const seed = randomBytes(BLOCK);
  for (let i = 0; i < SIZE / BLOCK; i++) {
    const b = Buffer.from(seed);
    b.writeUInt32LE(i, 0);
    b.writeUInt32LE(Math.imul(i, 2654435761) >>> 0, BLOCK / 2);
    hash.update(b);
    yield b;
  }
}

function uploadMultipart(
  address: string,
  key: string,
): Promise<{ status: number; body: string; sha256: string }> {
  const hash = createHash('sha256');
  const boundary = '----gatehouse-large';
  const u = new URL(address);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: `/storage/o/${key}`,
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'x-admin-secret': ADMIN },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            sha256: hash.digest('hex'),
          }),
        );
      },
    );
    req.on('error', reject);
    const it = blocks(hash);
    req.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const pump = () => {
      for (;;) {
        const next = it.next();
        if (next.done) {
          req.end(`\r\n--${boundary}--\r\n`);
          return;
        }
        if (!req.write(next.value)) {
          req.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

function downloadHash(
  address: string,
  key: string,
): Promise<{ status: number; bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  return new Promise((resolve, reject) => {
    http
      .get(`${address}/storage/o/${key}`, { headers: { 'x-admin-secret': ADMIN } }, (res) => {
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          hash.update(c);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, sha256: hash.digest('hex') }));
      })
      .on('error', reject);
  });
}

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

for (const backend of backendKinds as BackendKind[]) {
  describe(`200 MB round trip [${backend}]`, () => {
    let child: ChildProcess;
    let address: string;
    const dataDir = tempDir();
    before(async () => {
      const s3 =
        backend === 's3'
          ? {
              S3_ENDPOINT: peer.endpoint,
              S3_BUCKET: uniqueBucket(),
              S3_ACCESS_KEY_ID: 'S3RVER',
              S3_SECRET_ACCESS_KEY: 'S3RVER',
              S3_SSL_ENABLED: false,
            }
          : {};
      ({ child, address } = await startServer({
        DATA_DIR: dataDir,
        HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
        // Above the 50 MiB default.
        STORAGE_MAX_UPLOAD_SIZE: SIZE,
        ...s3,
      }));
    });
    after(async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.send('stop');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('comes back byte-exact while the server grows by less than 64 MB', { timeout: 600_000 }, async (t) => {
      // Warm up the code paths (and the SDK) before measuring.
      await uploadWarmup(address);
      await ask(child, 'baseline');
      const up = await uploadMultipart(address, 'public/big.bin');
      assert.equal(up.status, 200, up.body);
      assert.equal(JSON.parse(up.body).ContentLength, SIZE);
      const down = await downloadHash(address, 'public/big.bin');
      assert.equal(down.status, 200);
      assert.equal(down.bytes, SIZE);
      assert.equal(down.sha256, up.sha256);
      const report = await ask(child, 'report');
      const growth = (report.peak as number) - (report.baseline as number);
      t.diagnostic(
        `server RSS grew by ${(growth / 1048576).toFixed(1)} MB over ${SIZE / 1048576} MB up and down`,
      );
      assert.ok(growth < LIMIT, `RSS grew by ${(growth / 1048576).toFixed(1)} MB`);
    });
  });
}

async function uploadWarmup(address: string): Promise<void> {
  const u = new URL(address);
  const data = randomBytes(12 * 1024 * 1024);
  await new Promise<void>((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: '/storage/o/public/warmup.bin',
        headers: { 'content-type': 'application/octet-stream', 'x-admin-secret': ADMIN },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve());
      },
    );
    req.on('error', reject);
    req.end(data);
  });
  const down = await downloadHash(address, 'public/warmup.bin');
  assert.equal(down.bytes, data.length);
}
