/**
 * Zips read small files ahead of their turn and open larger ones when they come up: a folder mixing
 * both (and empty files) must still unzip to the exact bytes, in listing order, on both backends.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import yauzl from 'yauzl';
import yazl from 'yazl';
import type { ObjectStore } from '../../src/storage/backends/object-store.ts';
import { writtenEntries } from '../../src/storage/routes/send-zip.ts';
import type { TestApp } from '../helpers/app.ts';
import {
  type BackendKind,
  backendKinds,
  buildStorageApp,
  hbpRules,
  type S3Peer,
  startS3rver,
} from './helpers.ts';

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

function unzip(buf: Buffer): Promise<{ name: string; data: Buffer }[]> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const out: { name: string; data: Buffer }[] = [];
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            out.push({ name: entry.fileName, data: Buffer.concat(chunks) });
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(out));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

describe('yazl progress', () => {
  it('tells how many entries yazl has written (the read-ahead relies on it)', async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from('one'), 'a');
    zip.addBuffer(Buffer.from('two'), 'b');
    assert.equal(writtenEntries(zip, 0), 0, 'nothing is written before the compression finishes');
    zip.end();
    const chunks: Buffer[] = [];
    await new Promise<void>((resolve, reject) =>
      zip.outputStream
        .pipe(
          new Writable({
            write: (c: Buffer, _e, cb) => {
              chunks.push(c);
              cb();
            },
          }),
        )
        .on('finish', resolve)
        .on('error', reject),
    );
    assert.equal(writtenEntries(zip, 0), 2);
    assert.equal(writtenEntries(zip, 1), 2);
  });
});

for (const backend of backendKinds as BackendKind[]) {
  describe(`zip read-ahead [${backend}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildStorageApp(backend, peer, hbpRules());
    });
    after(() => t.close());

    it('unzips a folder of small, large and empty files to the exact bytes, in order', async () => {
      const sizes = [0, 10, 300 * 1024, 5, 1300 * 1024, 0, 256 * 1024, 256 * 1024 + 1, 40];
      for (let i = 0; i < 40; i++) sizes.push(100 + i * 997);
      const files = sizes.map((size, i) => ({
        key: `public/mixed/f${String(i).padStart(3, '0')}.bin`,
        data: i % 3 ? randomBytes(size) : Buffer.alloc(size, i),
      }));
      for (const f of files) {
        const res = await t.app.inject({
          method: 'POST',
          url: `/storage/o/${f.key}`,
          payload: f.data,
          headers: { 'content-type': 'application/octet-stream' },
        });
        assert.equal(res.statusCode, 200, res.body);
      }
      const res = await t.app.inject({ url: '/storage/o/public/mixed/' });
      assert.equal(res.statusCode, 200);
      const entries = await unzip(res.rawPayload);
      assert.deepEqual(
        entries.map((e) => e.name),
        files.map((f) => f.key),
      );
      for (const [i, f] of files.entries()) assert.ok(entries[i]?.data.equals(f.data), f.key);
    });
  });
}

// The loopback socket absorbs tens of megabytes (tcp_rmem up to 32 MB here), so the folder is larger than
// that; stored (not deflated) entries keep it quick. One backend suffices: the pacing is the route's.
describe('zip read-ahead pacing [fs]', () => {
  let t: TestApp;
  before(async () => {
    t = await buildStorageApp('fs', peer, hbpRules());
  });
  after(() => t.close());

  it('reads ahead only a few files while the client is not reading', async () => {
    const count = 500;
    for (let i = 0; i < count; i++) {
      const res = await t.app.inject({
        method: 'POST',
        url: `/storage/o/public/paced/f${String(i).padStart(3, '0')}`,
        payload: randomBytes(100 * 1024),
        headers: { 'content-type': 'image/png' },
      });
      assert.equal(res.statusCode, 200);
    }
    const objects = t.ctx.storage?.objects as ObjectStore;
    const read = objects.read;
    let reads = 0;
    objects.read = (...args) => {
      reads++;
      return read.apply(objects, args);
    };
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const outcome = await new Promise<{ early: number; later: number; entries: number }>(
        (resolve, reject) => {
          http
            .get(`${base}/storage/o/public/paced/`, (res) => {
              res.pause();
              (async () => {
                // Once the socket's buffers are full, the reading stops until the client reads.
                await sleep(1000);
                const early = reads;
                await sleep(500);
                const later = reads;
                const chunks: Buffer[] = [];
                res.on('data', (c: Buffer) => chunks.push(c));
                const done = new Promise((r) => res.on('end', r));
                res.resume();
                await done;
                return { early, later, entries: (await unzip(Buffer.concat(chunks))).length };
              })().then(resolve, reject);
            })
            .on('error', reject);
        },
      );
      assert.equal(outcome.later, outcome.early, 'no file was read while the client read nothing');
      assert.ok(outcome.later < count, `${outcome.later} of ${count} files read ahead`);
      assert.equal(outcome.entries, count);
    } finally {
      objects.read = read;
    }
  });
});
