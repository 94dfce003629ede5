import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { configFrom } from '../../src/config.ts';
import { AppError } from '../../src/errors.ts';
import { parseImageParams } from '../../src/storage/images/params.ts';
import { ImageService, type ImageSource, matchesEtag } from '../../src/storage/images/service.ts';
import { tempDir } from '../helpers/app.ts';
import { flat, photo } from './fixtures.ts';

function source(key: string, etag: string, data: Buffer, counter = { opens: 0 }): ImageSource {
  return {
    key,
    etag,
    size: data.length,
    async open() {
      counter.opens++;
      return { body: Readable.from([data]), etag };
    },
  };
}

describe('image service', () => {
  const dir = tempDir('gatehouse-image-service-');
  let png: Buffer;
  let service: ImageService;
  before(async () => {
    png = await photo(120, 80);
    service = new ImageService(configFrom({ DATA_DIR: dir, IMAGE_CACHE_DIR: path.join(dir, 'cache') }));
  });
  after(async () => {
    await service.flush(); // variants are written after their answer; let them land before removing the folder
    rmSync(dir, { recursive: true, force: true });
  });

  it('renders once, then answers the same request from the cache with identical bytes', async () => {
    const counter = { opens: 0 };
    const src = source('pics/a.png', '"etag-a"', png, counter);
    const params = parseImageParams({ w: '60', f: 'webp' });
    const renders = service.stats.renders;
    const first = await service.transform(src, { params });
    const second = await service.transform(src, { params });
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    if (first.status !== 200 || second.status !== 200) return;
    assert.equal(first.fromCache, false);
    assert.equal(second.fromCache, true);
    assert.ok(first.data.equals(second.data));
    assert.equal(first.etag, second.etag);
    assert.equal(second.contentType, 'image/webp');
    assert.equal(service.stats.renders, renders + 1);
    assert.equal(counter.opens, 1);
  });

  it('answers 304 for a matching If-None-Match without reading the source', async () => {
    const counter = { opens: 0 };
    const src = source('pics/b.png', '"etag-b"', png, counter);
    const params = parseImageParams({ w: '30' });
    const first = await service.transform(src, { params });
    const renders = service.stats.renders;
    const again = await service.transform(src, { params, ifNoneMatch: `W/"nope", ${first.etag}` });
    assert.deepEqual(again, { status: 304, etag: first.etag, vary: false });
    assert.equal(service.stats.renders, renders);
    assert.equal(counter.opens, 1);
  });

  it('answers 304 for If-Modified-Since at or after the source date when no If-None-Match is sent', async () => {
    const written = new Date('2026-01-02T03:04:05Z');
    const src = { ...source('pics/ims.png', '"ims"', png), lastModified: written };
    const params = parseImageParams({ w: '8' });
    const same = await service.transform(src, { params, ifModifiedSince: written.toUTCString() });
    assert.equal(same.status, 304);
    const older = await service.transform(src, { params, ifModifiedSince: 'Thu, 01 Jan 2026 00:00:00 GMT' });
    assert.equal(older.status, 200);
    // If-None-Match wins over If-Modified-Since when both are sent.
    const both = await service.transform(src, {
      params,
      ifNoneMatch: '"other"',
      ifModifiedSince: written.toUTCString(),
    });
    assert.equal(both.status, 200);
  });

  it('gives the same ETag for the same source and parameters on a fresh instance (no cache)', async () => {
    const other = new ImageService(configFrom({ DATA_DIR: dir, IMAGE_CACHE_MAX_SIZE: 0 }));
    const params = parseImageParams({ h: '40', q: '50', f: 'jpeg' });
    const a = await service.transform(source('k', '"e"', png), { params });
    const b = await other.transform(source('k', '"e"', png), { params, ifNoneMatch: a.etag });
    assert.equal(b.status, 304);
  });

  it('changes the ETag and the bytes when the source ETag changes (overwrite)', async () => {
    const params = parseImageParams({ w: '20', f: 'png' });
    const before = await service.transform(source('pics/c.png', '"v1"', await flat(40, 40, '#ff0000')), {
      params,
    });
    const after = await service.transform(source('pics/c.png', '"v2"', await flat(40, 40, '#00ff00')), {
      params,
    });
    assert.notEqual(before.etag, after.etag);
    if (before.status !== 200 || after.status !== 200) return assert.fail('expected 200s');
    assert.equal(after.fromCache, false);
    assert.ok(!before.data.equals(after.data));
  });

  it('varies on Accept for f=auto and keys the cache by the negotiated format', async () => {
    const params = parseImageParams({ f: 'auto', w: '10' });
    const src = source('pics/d.png', '"d"', png);
    const webp = await service.transform(src, { params, accept: 'image/webp,*/*' });
    const plain = await service.transform(src, { params, accept: '*/*' });
    if (webp.status !== 200 || plain.status !== 200) return assert.fail('expected 200s');
    assert.equal(webp.vary, true);
    assert.equal(webp.contentType, 'image/webp');
    assert.equal(plain.contentType, 'image/png');
    assert.notEqual(webp.etag, plain.etag);
  });

  it('renders from the store data file without reading its bytes, and reads them when the file has gone', async () => {
    const { randomUUID } = await import('node:crypto');
    const { writeFileSync } = await import('node:fs');
    const file = path.join(dir, `src~${randomUUID()}.data`);
    writeFileSync(file, png);
    const counter = { opens: 0 };
    const withFile = (key: string, p: string): ImageSource => ({
      ...source(key, '"f1"', png, counter),
      file: () => p,
    });
    const params = parseImageParams({ w: '30', f: 'png' });
    const a = await service.transform(withFile('f/a.png', file), { params });
    assert.equal(a.status, 200);
    assert.equal(counter.opens, 0, 'the bytes were not read by the service');
    // Overwritten or deleted since the rules saw it: the path names nothing, the bytes are read instead.
    const gone = path.join(dir, `src~${randomUUID()}.data`);
    const b = await service.transform(withFile('f/b.png', gone), { params });
    assert.equal(b.status, 200);
    assert.equal(counter.opens, 1);
    assert.ok(a.status === 200 && b.status === 200);
    assert.deepEqual(a.data, b.data);
  });

  it('shares one render between identical concurrent requests', async () => {
    const counter = { opens: 0 };
    const src = source('pics/e.png', '"e"', png, counter);
    const params = parseImageParams({ w: '77' });
    const results = await Promise.all([1, 2, 3].map(() => service.transform(src, { params })));
    assert.equal(counter.opens, 1);
    assert.equal(new Set(results.map((r) => r.etag)).size, 1);
  });

  it('does not cache a render whose bytes changed after the source ETag was read', async () => {
    const params = parseImageParams({ w: '33' });
    const racing: ImageSource = {
      key: 'pics/race.png',
      etag: '"before"',
      size: png.length,
      open: async () => ({ body: png, etag: '"after"' }),
    };
    await service.transform(racing, { params });
    const again = await service.transform(racing, { params });
    assert.equal(again.status === 200 && again.fromCache, false);
  });

  it('answers 503 when the store fails while the source is read', async () => {
    const failing: ImageSource = {
      key: 'pics/flaky.png',
      etag: '"flaky"',
      size: png.length,
      async open() {
        const body = new Readable({
          read() {
            this.push(png.subarray(0, 100));
            this.destroy(new Error('socket hang up'));
          },
        });
        return { body, etag: '"flaky"' };
      },
    };
    await assert.rejects(
      service.transform(failing, { params: parseImageParams({ w: '5' }) }),
      (err: unknown) =>
        err instanceof AppError && err.statusCode === 503 && err.code === 'STORAGE_UNAVAILABLE',
    );
  });

  it('refuses a file that turns out longer than IMAGE_MAX_SOURCE_SIZE while it is read', async () => {
    const small = new ImageService(configFrom({ DATA_DIR: dir, IMAGE_MAX_SOURCE_SIZE: 100 }));
    const lying: ImageSource = { ...source('pics/lying.png', '"l"', png), size: 50 };
    await assert.rejects(
      small.transform(lying, { params: parseImageParams({ w: '5' }) }),
      (err: unknown) => err instanceof AppError && err.statusCode === 422 && err.code === 'IMAGE_TOO_LARGE',
    );
  });

  it('refuses a source over IMAGE_MAX_SOURCE_SIZE with 422 without opening it', async () => {
    const small = new ImageService(configFrom({ DATA_DIR: dir, IMAGE_MAX_SOURCE_SIZE: 100 }));
    const counter = { opens: 0 };
    await assert.rejects(
      small.transform(source('big.png', '"x"', png, counter), { params: parseImageParams({ w: '5' }) }),
      (err: unknown) => err instanceof AppError && err.statusCode === 422 && err.code === 'IMAGE_TOO_LARGE',
    );
    assert.equal(counter.opens, 0);
  });

  it('renders again after forget() drops the variants of a source', async () => {
    const src = source('pics/f.png', '"f"', png);
    const params = parseImageParams({ w: '12' });
    await service.transform(src, { params });
    await service.forget('pics/f.png');
    const again = await service.transform(src, { params });
    assert.equal(again.status === 200 && again.fromCache, false);
  });

  it('writes output sharp can decode at the requested size', async () => {
    const out = await service.transform(source('pics/g.png', '"g"', png), {
      params: parseImageParams({ w: '50', h: '50', f: 'avif' }),
    });
    if (out.status !== 200) return assert.fail('expected 200');
    const m = await sharp(out.data).metadata();
    assert.deepEqual([m.width, m.height, m.compression], [50, 50, 'av1']);
    assert.equal(out.contentType, 'image/avif');
  });
});

describe('matchesEtag', () => {
  it('matches exact, weak, listed and * values only', () => {
    assert.equal(matchesEtag('"a"', '"a"'), true);
    assert.equal(matchesEtag('W/"a"', '"a"'), true);
    assert.equal(matchesEtag('"b", "a"', '"a"'), true);
    assert.equal(matchesEtag('*', '"a"'), true);
    assert.equal(matchesEtag('"b"', '"a"'), false);
    assert.equal(matchesEtag(undefined, '"a"'), false);
  });
});
