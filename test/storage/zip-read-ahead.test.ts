/**
 * Zips read small files ahead of their turn and open larger ones when they come up: a folder mixing
 * both (and empty files) must still unzip to the exact bytes, in listing order, on both backends.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import yauzl from 'yauzl';
import type { TestApp } from '../helpers/app.ts';
import { type BackendKind, backendKinds, buildStorageApp, type S3Peer, startS3rver } from './helpers.ts';

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

for (const backend of backendKinds as BackendKind[]) {
  describe(`zip read-ahead [${backend}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildStorageApp(backend, peer);
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
