/**
 * One contract, two backends: every ObjectStore behaves the same on the local folder and on a real S3
 * peer (s3rver).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { temporaryFiles } from '../../src/storage/backends/fs.ts';
import { type ObjectStore, StoreUnavailable } from '../../src/storage/backends/object-store.ts';
import { S3ObjectStore } from '../../src/storage/backends/s3.ts';
import {
  type BackendKind,
  backendKinds,
  makeStore,
  type S3Peer,
  s3Settings,
  startS3rver,
} from './helpers.ts';

const md5 = (b: Buffer) => `"${createHash('md5').update(b).digest('hex')}"`;
const body = (s: string | Buffer) => Readable.from([Buffer.from(s)]);

/** A body that sends some bytes, then fails as a dropped client does. */
function failingBody(bytes: number, err = new Error('client went away')): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(Buffer.alloc(bytes, 1));
      } else {
        setImmediate(() => this.destroy(err));
      }
    },
  });
}

async function collect(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(prefix)) keys.push(o.key);
  return keys;
}

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

for (const kind of backendKinds as BackendKind[]) {
  describe(`object store contract [${kind}]`, () => {
    let store: ObjectStore;
    let root: string | undefined;
    let close: () => Promise<void>;
    before(async () => {
      const s = await makeStore(kind, peer, { listPageSize: 3 });
      store = s.store;
      root = 'root' in s ? s.root : undefined;
      close = s.close;
    });
    after(() => close());

    it('stores bytes, content type and token, and reads them back with a quoted md5 ETag', async () => {
      const data = Buffer.from('hello world');
      const info = await store.put('a/hello.txt', body(data), { contentType: 'text/plain', token: 't-1' });
      assert.equal(info.key, 'a/hello.txt');
      assert.equal(info.size, 11);
      assert.equal(info.contentType, 'text/plain');
      assert.equal(info.token, 't-1');
      assert.equal(info.etag, md5(data));
      assert.ok(info.lastModified instanceof Date && !Number.isNaN(info.lastModified.getTime()));
      const head = await store.head('a/hello.txt');
      assert.deepEqual(head, info);
      const got = await store.get('a/hello.txt');
      assert.ok(got);
      assert.deepEqual(await buffer(got.body), data);
      assert.equal(got.info.size, 11);
      assert.equal(got.info.token, 't-1');
    });

    it('returns undefined for a missing object on head, get and setToken, and false on delete', async () => {
      assert.equal(await store.head('missing/x'), undefined);
      assert.equal(await store.get('missing/x'), undefined);
      assert.equal(await store.setToken('missing/x', 'n'), undefined);
      assert.equal(await store.delete('missing/x'), false);
    });

    it('answers head with every overwrite, token change and delete at once, right after a head', async () => {
      await store.put('h/seen', body('one'), { contentType: 'text/plain', token: 't-1' });
      assert.equal((await store.head('h/seen'))?.token, 't-1');
      const second = await store.put('h/seen', body('second'), { contentType: 'text/csv', token: 't-1' });
      assert.deepEqual(await store.head('h/seen'), second);
      await store.setToken('h/seen', 't-2');
      assert.equal((await store.head('h/seen'))?.token, 't-2');
      assert.equal(await store.delete('h/seen'), true);
      assert.equal(await store.head('h/seen'), undefined);
      await store.put('h/seen', body('back'), { contentType: 'text/plain', token: 't-3' });
      assert.equal((await store.head('h/seen'))?.size, 4);
    });

    it('reads an inclusive byte range and reports the full size', async () => {
      await store.put('r/digits', body('0123456789'), { contentType: 'text/plain', token: 't' });
      const got = await store.get('r/digits', { start: 2, end: 5 });
      assert.ok(got);
      assert.equal((await buffer(got.body)).toString(), '2345');
      assert.equal(got.info.size, 10);
    });

    it('stores an empty object', async () => {
      const info = await store.put('e/empty', body(''), {
        contentType: 'application/octet-stream',
        token: 't',
      });
      assert.equal(info.size, 0);
      const got = await store.get('e/empty');
      assert.ok(got);
      assert.equal((await buffer(got.body)).length, 0);
    });

    it('overwrites in place: new bytes, new token, old bytes gone', async () => {
      await store.put('o/file', body('first version'), { contentType: 'text/plain', token: 'one' });
      const info = await store.put('o/file', body('second'), { contentType: 'text/csv', token: 'two' });
      assert.equal(info.size, 6);
      const got = await store.get('o/file');
      assert.ok(got);
      assert.equal((await buffer(got.body)).toString(), 'second');
      assert.equal(got.info.contentType, 'text/csv');
      assert.equal(got.info.token, 'two');
    });

    it('keeps keys exact: case, spaces, unicode and percent signs', async () => {
      const keys = ['k/Photo.PNG', 'k/photo.png', 'k/with space', 'k/ünï©ødé ✓', 'k/100%25 real %'];
      for (const [i, k] of keys.entries()) {
        await store.put(k, body(`v${i}`), { contentType: 'text/plain', token: `t${i}` });
      }
      for (const [i, k] of keys.entries()) {
        const got = await store.get(k);
        assert.ok(got, k);
        assert.equal((await buffer(got.body)).toString(), `v${i}`, k);
      }
      assert.deepEqual((await collect(store, 'k/')).sort(), [...keys].sort());
    });

    // s3rver keeps keys as file names, so it cannot hold these two; AWS, MinIO and the fs store can.
    if (kind === 'fs')
      it('holds a file beside a folder of the same name', async () => {
        await store.put('ff/a', body('file'), { contentType: 'text/plain', token: 't' });
        await store.put('ff/a/b', body('nested'), { contentType: 'text/plain', token: 't' });
        assert.equal((await store.head('ff/a'))?.size, 4);
        assert.equal((await store.head('ff/a/b'))?.size, 6);
        assert.deepEqual(await collect(store, 'ff/'), ['ff/a', 'ff/a/b']);
        assert.equal(await store.delete('ff/a'), true);
        assert.equal((await store.head('ff/a/b'))?.size, 6);
      });

    // s3rver keeps keys as file names, so it cannot hold this; AWS, MinIO and the fs store can.
    if (kind === 'fs')
      it('stores a key with a very long segment', async () => {
        const k = `long/${'x'.repeat(300)}/${'é'.repeat(200)}`;
        await store.put(k, body('long'), { contentType: 'text/plain', token: 't' });
        assert.equal((await store.head(k))?.size, 4);
        assert.deepEqual(await collect(store, 'long/'), [k]);
      });

    it('lists every object under a prefix across pages, in key order, and nothing from sibling prefixes', async () => {
      const keys = Array.from({ length: 10 }, (_, i) => `l/dir/f${String(i).padStart(2, '0')}`);
      for (const k of [...keys].reverse())
        await store.put(k, body(k), { contentType: 'text/plain', token: 't' });
      await store.put('l/dir2/other', body('x'), { contentType: 'text/plain', token: 't' });
      await store.put('l/dir/sub/deep', body('x'), { contentType: 'text/plain', token: 'deep' });
      const listed: string[] = [];
      for await (const o of store.list('l/dir/')) {
        listed.push(o.key);
        assert.equal(typeof o.contentType, 'string');
        assert.ok(o.token);
      }
      assert.deepEqual(listed, [...keys, 'l/dir/sub/deep']);
      assert.deepEqual(await collect(store, 'l/nothing/'), []);
    });

    it('deletes an object', async () => {
      await store.put('d/x', body('x'), { contentType: 'text/plain', token: 't' });
      assert.equal(await store.delete('d/x'), true);
      assert.equal(await store.head('d/x'), undefined);
      assert.deepEqual(await collect(store, 'd/'), []);
    });

    it('replaces the token, keeping bytes and content type', async () => {
      const k = 'tok/my file ✓.bin';
      await store.put(k, body('bytes'), { contentType: 'application/x-thing', token: 'old' });
      const info = await store.setToken(k, 'new');
      assert.equal(info?.token, 'new');
      const got = await store.get(k);
      assert.ok(got);
      assert.equal((await buffer(got.body)).toString(), 'bytes');
      assert.equal(got.info.contentType, 'application/x-thing');
      assert.equal(got.info.token, 'new');
    });

    it('leaves nothing when the body fails: no object, and no temporary file', async () => {
      const err = new Error('client went away');
      await assert.rejects(
        store.put('f/new', failingBody(1000, err), { contentType: 'x/y', token: 't' }),
        err,
      );
      assert.equal(await store.head('f/new'), undefined);
      if (root) assert.deepEqual(await temporaryFiles(root), []);
    });

    it('keeps the old version intact when an overwrite fails midway, even past one multipart part', async () => {
      await store.put('f/old', body('the original'), { contentType: 'text/plain', token: 'keep' });
      const err = new Error('aborted');
      await assert.rejects(
        store.put('f/old', failingBody(6 * 1024 * 1024, err), { contentType: 'x/y', token: 'new' }),
        err,
      );
      const got = await store.get('f/old');
      assert.ok(got);
      assert.equal((await buffer(got.body)).toString(), 'the original');
      assert.equal(got.info.token, 'keep');
      if (root) assert.deepEqual(await temporaryFiles(root), []);
    });

    it('streams a multi-part object (12 MiB) byte-exact', async () => {
      const data = Buffer.alloc(12 * 1024 * 1024);
      for (let i = 0; i < data.length; i += 4096) data.writeUInt32LE(i, i);
      const info = await store.put('big/blob', Readable.from([data.subarray(0, 7e6), data.subarray(7e6)]), {
        contentType: 'application/octet-stream',
        token: 't',
      });
      assert.equal(info.size, data.length);
      const got = await store.get('big/blob');
      assert.ok(got);
      const back = await buffer(got.body);
      assert.ok(back.equals(data));
    });

    it('answers ping while the store is up', async () => {
      await store.ping();
    });
  });
}

describe('object store contract [s3, outage]', () => {
  it('reports StoreUnavailable when S3 cannot be reached', async () => {
    const store = new S3ObjectStore({ ...s3Settings(peer), endpoint: 'http://127.0.0.1:1' });
    await assert.rejects(store.ping(), StoreUnavailable);
    await assert.rejects(store.head('x'), StoreUnavailable);
    await store.close();
  });
});
