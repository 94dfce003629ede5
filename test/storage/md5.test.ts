/**
 * StreamMd5: the upload ETag, hashed inline for small files and on a worker thread past the first MiB.
 * Whatever the sizes, chunking and interleaving, the digest is the MD5 of the bytes.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { FsObjectStore } from '../../src/storage/backends/fs.ts';
import { BLOCK, StreamMd5 } from '../../src/storage/backends/md5.ts';
import { tempDir } from '../helpers/app.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

async function hashInChunks(data: Buffer, chunk: number): Promise<string> {
  const h = new StreamMd5();
  for (let at = 0; at < data.length; at += chunk) {
    const wait = h.update(data.subarray(at, at + chunk));
    if (wait !== undefined) await wait;
  }
  return h.digest();
}

describe('StreamMd5', () => {
  it('equals MD5 for sizes around the inline limit and the block size', async () => {
    for (const size of [0, 1, 4100, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 12_345]) {
      const data = randomBytes(size);
      for (const chunk of [1000, 65_536, BLOCK + 7]) {
        assert.equal(await hashInChunks(data, chunk), md5(data), `size ${size}, chunks of ${chunk}`);
      }
    }
  });

  it('keeps concurrent streams apart, and survives streams dropped midway', async () => {
    const datas = [0, 1, 2, 3].map((i) => randomBytes(2 * BLOCK + i * 100_003));
    const dropped = new StreamMd5();
    await dropped.update(randomBytes(BLOCK + 5));
    dropped.dispose();
    dropped.dispose();
    const digests = await Promise.all(datas.map((d, i) => hashInChunks(d, 30_000 + i * 7_777)));
    assert.deepEqual(
      digests,
      datas.map((d) => md5(d)),
    );
  });

  it('holds back a writer that runs ahead of the hashing thread', async () => {
    const h = new StreamMd5();
    const data = randomBytes(12 * BLOCK);
    let waited = 0;
    for (let at = 0; at < data.length; at += BLOCK) {
      const wait = h.update(data.subarray(at, at + BLOCK));
      if (wait !== undefined) {
        waited++;
        await wait;
      }
    }
    assert.ok(waited > 0, 'update asked the writer to wait at least once');
    assert.equal(await h.digest(), md5(data));
  });

  it('gives the fs store a quoted MD5 ETag for a multi-MiB upload', async () => {
    const root = tempDir('gatehouse-md5-');
    const store = new FsObjectStore(root);
    try {
      await store.init();
      const data = randomBytes(5 * BLOCK + 3);
      const chunks = [];
      for (let at = 0; at < data.length; at += 64 * 1024) chunks.push(data.subarray(at, at + 64 * 1024));
      const info = await store.put('big/file', Readable.from(chunks), { contentType: 'x/y', token: 't' });
      assert.equal(info.etag, `"${md5(data)}"`);
      assert.equal(info.size, data.length);
    } finally {
      await store.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
