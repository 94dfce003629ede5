/**
 * A rendered variant is answered before it is written to the cache: meanwhile the same request is a cache
 * hit from memory, and forgetting the source waits for the write so that nothing lands on disk after it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { configFrom } from '../../src/config.ts';
import { parseImageParams } from '../../src/storage/images/params.ts';
import { ImageService, type ImageSource } from '../../src/storage/images/service.ts';
import { tempDir } from '../helpers/app.ts';
import { photo } from './fixtures.ts';

const source = (key: string, etag: string, data: Buffer): ImageSource => ({
  key,
  etag,
  size: data.length,
  async open() {
    return { body: Readable.from([data]), etag };
  },
});

describe('variants written behind the answer', () => {
  const dir = tempDir('gatehouse-image-write-behind-');
  const cacheDir = path.join(dir, 'cache');
  const files = () =>
    existsSync(cacheDir)
      ? readdirSync(cacheDir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length
      : 0;
  let png: Buffer;
  let service: ImageService;
  before(async () => {
    png = await photo(120, 80);
    service = new ImageService(configFrom({ DATA_DIR: dir, IMAGE_CACHE_DIR: cacheDir }));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('serves the variant from memory until it is on disk, then from disk', async () => {
    const src = source('pics/wb.png', '"wb-1"', png);
    const params = parseImageParams({ w: '50', f: 'webp' });
    const renders = service.stats.renders;
    const first = await service.transform(src, { params });
    // No await of the write in between: the second answer must not render again.
    const second = await service.transform(src, { params });
    assert.ok(first.status === 200 && second.status === 200);
    assert.equal(first.fromCache, false);
    assert.equal(second.fromCache, true);
    assert.ok(first.data.equals(second.data));
    assert.equal(service.stats.renders, renders + 1);
    await service.flush();
    assert.equal(files(), 1);
    const third = await service.transform(src, { params });
    assert.ok(third.status === 200 && third.fromCache && third.data.equals(first.data));
  });

  it('leaves nothing on disk when the source is forgotten while its variant is being written', async () => {
    const before = files();
    const src = source('pics/forgotten.png', '"f-1"', png);
    await service.transform(src, { params: parseImageParams({ w: '40' }) });
    await service.forget('pics/forgotten.png');
    await service.flush();
    assert.equal(files(), before);
    const again = await service.transform(src, { params: parseImageParams({ w: '40' }) });
    assert.ok(again.status === 200 && !again.fromCache);
    await service.flush();
  });
});
