import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { VariantCache } from '../../src/storage/images/cache.ts';
import { tempDir } from '../helpers/app.ts';

const dirs: string[] = [];
function newDir(): string {
  const d = tempDir('gatehouse-image-cache-');
  dirs.push(d);
  return d;
}

function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

describe('variant cache', () => {
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('returns what was put, with its format, for the same source ETag and variant', async () => {
    const cache = new VariantCache(newDir(), 1024 * 1024);
    await cache.put('a/b.png', '"e1"', 'v1', { data: Buffer.from('pixels'), format: 'webp' });
    const got = await cache.get('a/b.png', '"e1"', 'v1');
    assert.deepEqual(got, { data: Buffer.from('pixels'), format: 'webp' });
    assert.equal(await cache.get('a/b.png', '"e1"', 'v2'), undefined);
    assert.equal(await cache.get('a/c.png', '"e1"', 'v1'), undefined);
  });

  it('never serves a variant of an earlier source ETag, and removes it when a new one is written', async () => {
    const dir = newDir();
    const cache = new VariantCache(dir, 1024 * 1024);
    await cache.put('k', '"old"', 'v1', { data: Buffer.from('old'), format: 'png' });
    await cache.put('k', '"old"', 'v2', { data: Buffer.from('old2'), format: 'png' });
    assert.equal(await cache.get('k', '"new"', 'v1'), undefined);
    await cache.put('k', '"new"', 'v1', { data: Buffer.from('new'), format: 'png' });
    assert.equal(files(dir).length, 1);
    assert.equal(cache.size, 3);
    assert.equal((await cache.get('k', '"new"', 'v1'))?.data.toString(), 'new');
  });

  it('drops every variant of a deleted source', async () => {
    const dir = newDir();
    const cache = new VariantCache(dir, 1024 * 1024);
    await cache.put('k', '"e"', 'v1', { data: Buffer.from('1'), format: 'png' });
    await cache.put('k', '"e"', 'v2', { data: Buffer.from('2'), format: 'png' });
    await cache.put('other', '"e"', 'v1', { data: Buffer.from('3'), format: 'png' });
    await cache.dropSource('k');
    assert.equal(await cache.get('k', '"e"', 'v1'), undefined);
    assert.equal(files(dir).length, 1);
    assert.equal(cache.size, 1);
  });

  it('evicts the least recently used variants to stay within its size', async () => {
    const dir = newDir();
    const cache = new VariantCache(dir, 250);
    const kb = (c: string) => Buffer.alloc(100, c);
    await cache.put('a', '"e"', 'v', { data: kb('a'), format: 'png' });
    await cache.put('b', '"e"', 'v', { data: kb('b'), format: 'png' });
    assert.ok(await cache.get('a', '"e"', 'v')); // a is now more recent than b
    await cache.put('c', '"e"', 'v', { data: kb('c'), format: 'png' });
    assert.equal(await cache.get('b', '"e"', 'v'), undefined);
    assert.ok(await cache.get('a', '"e"', 'v'));
    assert.ok(await cache.get('c', '"e"', 'v'));
    assert.ok(cache.size <= 250);
    assert.equal(files(dir).length, 2);
  });

  it('does not store a variant larger than the whole cache', async () => {
    const dir = newDir();
    const cache = new VariantCache(dir, 10);
    await cache.put('a', '"e"', 'v', { data: Buffer.alloc(11), format: 'png' });
    assert.equal(await cache.get('a', '"e"', 'v'), undefined);
    assert.equal(files(dir).length, 0);
  });

  it('stores nothing when its size is 0', async () => {
    const dir = newDir();
    const cache = new VariantCache(dir, 0);
    await cache.put('a', '"e"', 'v', { data: Buffer.from('x'), format: 'png' });
    assert.equal(await cache.get('a', '"e"', 'v'), undefined);
    assert.equal(files(dir).length, 0);
  });

  it('picks up variants left by an earlier run and counts them against its size', async () => {
    const dir = newDir();
    const first = new VariantCache(dir, 1000);
    await first.put('a', '"e"', 'v', { data: Buffer.alloc(300), format: 'png' });
    await first.put('b', '"e"', 'v', { data: Buffer.alloc(300), format: 'png' });
    const second = new VariantCache(dir, 1000);
    assert.equal((await second.get('a', '"e"', 'v'))?.data.length, 300);
    assert.equal(second.size, 600);
  });
});
