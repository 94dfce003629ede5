/**
 * The fs backend's metadata cache (src/storage/backends/fs.ts): `head` must never answer with a version
 * the process has already replaced, whatever the interleaving of reads and commits, and a change made
 * behind the service's back is seen once a copy expires.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { FsObjectStore, MetadataCache } from '../../src/storage/backends/fs.ts';
import type { ObjectInfo } from '../../src/storage/backends/object-store.ts';
import { tempDir } from '../helpers/app.ts';

const body = (s: string) => Readable.from([Buffer.from(s)]);
const roots: string[] = [];

async function open(opts: ConstructorParameters<typeof FsObjectStore>[1] = {}) {
  const root = tempDir('gatehouse-fs-meta-');
  roots.push(root);
  const store = new FsObjectStore(root, opts);
  await store.init();
  return { store, root };
}

after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const info = (token: string): ObjectInfo => ({
  key: 'k',
  size: 1,
  lastModified: new Date(),
  etag: '"x"',
  contentType: 'text/plain',
  token,
});

describe('fs metadata cache', () => {
  it('does not store what a read got when a commit started or ended while it was reading', async () => {
    const c = new MetadataCache(10, 60_000);
    // A read that began before a commit and ended after it.
    let started = c.readStarted();
    await c.changing('k', async () => {});
    c.store('k', info('old'), started);
    assert.equal(c.get('k'), undefined);
    // A read that began during a commit (it may have read the file before the commit renamed it).
    let release = () => {};
    const commit = c.changing('k', () => new Promise<void>((r) => (release = r)));
    started = c.readStarted();
    release();
    await commit;
    c.store('k', info('old'), started);
    assert.equal(c.get('k'), undefined);
    // A read that began after the commit ended is kept, until the next commit on the key.
    started = c.readStarted();
    c.store('k', info('new'), started);
    assert.equal(c.get('k')?.token, 'new');
    await c.changing('k', async () => {});
    assert.equal(c.get('k'), undefined);
  });

  it('never keeps a version replaced by a commit that overlapped the read', async () => {
    const { store } = await open();
    await store.put('race/f', body('x'), { contentType: 'text/plain', token: 't-0' });
    for (let i = 1; i <= 30; i++) {
      // Reads started before, during and after the commit, all racing it.
      const reads = [store.head('race/f'), store.head('race/f')];
      const commit = store.setToken('race/f', `t-${i}`);
      reads.push(store.head('race/f'));
      await Promise.all([...reads, commit]);
      assert.equal((await store.head('race/f'))?.token, `t-${i}`, `round ${i}`);
    }
  });

  it('hands out copies: changing an answer does not change the next one', async () => {
    const { store } = await open();
    await store.put('copy/f', body('abc'), { contentType: 'text/plain', token: 't' });
    const a = await store.head('copy/f');
    assert.ok(a);
    a.token = 'changed';
    a.lastModified.setTime(0);
    const b = await store.head('copy/f');
    assert.equal(b?.token, 't');
    assert.notEqual(b?.lastModified.getTime(), 0);
  });

  it('sees a change made behind its back once the copy expires', async () => {
    const { store, root } = await open({ metadataCacheTtlMs: 50 });
    await store.put('out/f', body('abc'), { contentType: 'text/plain', token: 'before' });
    assert.equal((await store.head('out/f'))?.token, 'before');
    const dir = path.join(root, 'objects', 'out');
    const sidecar = path.join(dir, readdirSync(dir).find((n) => n.endsWith('~meta.json')) as string);
    writeFileSync(sidecar, JSON.stringify({ ...JSON.parse(readFileSync(sidecar, 'utf8')), token: 'after' }));
    await new Promise((r) => setTimeout(r, 80));
    assert.equal((await store.head('out/f'))?.token, 'after');
    rmSync(sidecar);
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(await store.head('out/f'), undefined);
  });

  it('holds at most the configured number of copies and still answers for the others', async () => {
    const { store } = await open({ metadataCacheEntries: 2 });
    for (const k of ['n/a', 'n/b', 'n/c'])
      await store.put(k, body(k), { contentType: 'text/plain', token: k });
    for (let round = 0; round < 2; round++) {
      for (const k of ['n/a', 'n/b', 'n/c']) assert.equal((await store.head(k))?.token, k);
    }
  });
});
