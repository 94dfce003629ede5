/**
 * A download's headers (ETag, Content-Length, Content-Type) always describe the bytes it sends, even when
 * the file is overwritten between reading its metadata and opening its bytes. The overwrite is a real
 * one, made through the same store at exactly that moment (the store's own method runs first).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { FsObjectStore } from '../../src/storage/backends/fs.ts';
import { ObjectChanged, type ObjectInfo, type ObjectStore } from '../../src/storage/backends/object-store.ts';
import { completeUpload } from '../../src/storage/files.ts';
import type { TestApp } from '../helpers/app.ts';
import {
  type BackendKind,
  backendKinds,
  buildStorageApp,
  makeStore,
  type S3Peer,
  type StoreUnderTest,
  startS3rver,
} from './helpers.ts';

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

const md5 = (b: Buffer | string) => `"${createHash('md5').update(b).digest('hex')}"`;
const OLD = 'the old version';
const NEW = '<p>the new version, longer and of another type</p>';

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function put(store: ObjectStore, key: string, data: string, contentType = 'text/plain') {
  return store.put(key, Readable.from([Buffer.from(data)]), { contentType, token: 'tok' });
}

describe('fs metadata cache and versions', () => {
  let s: StoreUnderTest;
  before(async () => {
    s = await makeStore('fs');
  });
  after(() => s.close());

  it('opens what is on disk, and forgets a stale copy, after a change behind its back', async () => {
    const v1 = await put(s.store, 'c/file', OLD);
    assert.equal((await s.store.head('c/file'))?.etag, v1.etag, 'the copy is cached');
    // Another writer on the same folder (a restore, a second process): the cache cannot know.
    const other = new FsObjectStore(s.root as string);
    await put(other, 'c/file', NEW);
    const got = await s.store.get('c/file');
    assert.ok(got);
    const bytes = await readAll(got.body);
    assert.equal(bytes.toString(), NEW);
    assert.equal(got.info.etag, md5(bytes), 'metadata and bytes of one version');
    await assert.rejects(s.store.get('c/file', undefined, v1), ObjectChanged);
    assert.equal((await s.store.head('c/file'))?.etag, md5(NEW), 'the stale copy was dropped');
  });
});

for (const backend of backendKinds as BackendKind[]) {
  describe(`get with an expected version [${backend}]`, () => {
    let s: StoreUnderTest;
    before(async () => {
      s = await makeStore(backend, peer);
    });
    after(() => s.close());

    it('opens and reads the version it was given, and only that one', async () => {
      const v1 = await put(s.store, 'v/file', OLD);
      const got = await s.store.get('v/file', undefined, v1);
      assert.ok(got);
      assert.equal((await readAll(got.body)).toString(), OLD);
      const ranged = await s.store.get('v/file', { start: 4, end: 6 }, v1);
      assert.equal((await readAll(ranged?.body as Readable)).toString(), 'old');

      assert.equal((await s.store.read('v/file', v1)).toString(), OLD);

      await put(s.store, 'v/file', NEW);
      await assert.rejects(s.store.get('v/file', undefined, v1), ObjectChanged);
      await assert.rejects(s.store.read('v/file', v1), ObjectChanged);
      // Without the store's version name, the metadata decides (the ETag and the date).
      const { version: _, ...described } = v1;
      await assert.rejects(s.store.get('v/file', undefined, described as ObjectInfo), ObjectChanged);
    });

    it('reports a deleted file as changed', async () => {
      const v1 = await put(s.store, 'v/gone', OLD);
      await s.store.delete('v/gone');
      await assert.rejects(s.store.get('v/gone', undefined, v1), ObjectChanged);
      await assert.rejects(s.store.read('v/gone', v1), ObjectChanged);
    });
  });

  describe(`downloads racing an overwrite [${backend}]`, () => {
    let t: TestApp;
    let objects: ObjectStore;
    const key = 'public/race/file.txt';

    before(async () => {
      t = await buildStorageApp(backend, peer);
      objects = t.ctx.storage?.objects as ObjectStore;
    });
    after(() => t.close());

    /** Runs `fn` with one overwrite of the file made right after the store's `method` next answers. */
    async function racing<T>(method: 'head' | 'get', fn: () => Promise<T>): Promise<T> {
      // The first version as an upload leaves it (object and row); the racing overwrite is the store's.
      const storage = t.ctx.storage;
      if (!storage) throw new Error('storage is off');
      await storage.catalog.ready;
      const info = await put(objects, key, OLD);
      await completeUpload(
        { config: t.config, db: t.ctx.db, clock: t.clock, ...storage },
        { info, ownerId: null, reservation: undefined },
      );
      const original = objects[method] as (...args: unknown[]) => Promise<unknown>;
      let armed = true;
      const patched = async (...args: unknown[]) => {
        const result = await original.apply(objects, args);
        if (armed && args[0] === key) {
          armed = false;
          await put(objects, key, NEW, 'text/html');
        }
        return result;
      };
      Object.assign(objects, { [method]: patched });
      try {
        const out = await fn();
        assert.equal(armed, false, 'the overwrite happened');
        return out;
      } finally {
        Object.assign(objects, { [method]: original });
      }
    }

    function assertConsistent(res: { headers: Record<string, unknown>; rawPayload: Buffer }) {
      const body = res.rawPayload;
      assert.equal(res.headers.etag, md5(body), 'the ETag is the one of the bytes sent');
      assert.equal(Number(res.headers['content-length']), body.length);
      const type = String(res.headers['content-type']);
      assert.equal(type.startsWith('text/html'), body.toString() === NEW, `type ${type} for ${body}`);
    }

    it('a range request overwritten after its metadata was read sends the new version whole', async () => {
      const res = await racing('head', () =>
        t.app.inject({ url: `/storage/o/${key}`, headers: { range: 'bytes=0-' } }),
      );
      assert.equal(res.statusCode, 206);
      assert.equal(res.body, NEW, 'the read was retried on the new version');
      assertConsistent(res);
      assert.equal(res.headers['content-range'], `bytes 0-${NEW.length - 1}/${NEW.length}`);
    });

    it('a conditional request overwritten after its metadata was read stays consistent', async () => {
      const res = await racing('head', () =>
        t.app.inject({ url: `/storage/o/${key}`, headers: { 'if-none-match': '"something-else"' } }),
      );
      assert.equal(res.statusCode, 200);
      assertConsistent(res);
    });

    it('a plain GET overwritten right after its store read sends the version it opened', async () => {
      const res = await racing('get', () => t.app.inject({ url: `/storage/o/${key}` }));
      assert.equal(res.statusCode, 200);
      assertConsistent(res);
    });
  });
}
