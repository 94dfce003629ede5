import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { accessToken } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';
import type { DbKind } from '../helpers/db.ts';
import {
  type BackendKind,
  buildStorageApp,
  dbBackendPairs,
  hbpRules,
  type S3Peer,
  startS3rver,
} from '../storage/helpers.ts';
import { exifRotatedJpeg, flat, photo, pixelAt, pixels, pngBomb, variance } from './fixtures.ts';

interface Fixtures {
  photo: Buffer;
  rotated: Buffer;
  bomb: Buffer;
}

/** Files in the variant cache, once the variants written behind their answers are on disk. */
async function cachedFiles(t: TestApp): Promise<string[]> {
  await t.ctx.storage?.images.flush();
  const dir = t.config.IMAGE_CACHE_DIR;
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name);
}

function imageRoutes(db: DbKind, backend: BackendKind) {
  describe(`image transformation on GET /storage/o [${db}, ${backend}]`, () => {
    let peer: S3Peer | undefined;
    let t: TestApp;
    let fx: Fixtures;
    const get = (url: string, headers: Record<string, string> = {}) =>
      t.app.inject({ method: 'GET', url, headers });
    const upload = async (key: string, data: Buffer, type: string, headers: Record<string, string> = {}) => {
      const res = await t.app.inject({
        method: 'POST',
        url: `/storage/o/${key}`,
        payload: data,
        headers: { 'content-type': type, ...headers },
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as { ETag: string; Metadata: { token: string } };
    };
    const images = () => {
      const s = t.ctx.storage;
      if (!s) throw new Error('storage is off');
      return s.images;
    };
    const meta = async (body: Buffer) => sharp(body).metadata();

    before(async () => {
      if (backend === 's3') peer = await startS3rver();
      t = await buildStorageApp(backend, peer, hbpRules(), db);
      fx = { photo: await photo(300, 200), rotated: await exifRotatedJpeg(), bomb: pngBomb() };
      await upload('public/img/photo.png', fx.photo, 'image/png');
      await upload('public/img/rotated.jpg', fx.rotated, 'image/jpeg');
      await upload('public/img/notes.txt', Buffer.from('not an image at all\n'), 'text/plain');
      await upload('public/img/bomb.png', fx.bomb, 'image/png');
      await upload(
        'public/img/broken.png',
        Buffer.concat([fx.photo.subarray(0, 80), Buffer.alloc(500, 1)]),
        'image/png',
      );
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    describe('size', () => {
      const cases: [string, number, number][] = [
        ['w=150', 150, 100],
        ['h=50', 75, 50],
        ['w=64&h=64', 64, 64],
        ['w=0&h=0&f=png', 300, 200],
        ['q=70', 300, 200],
      ];
      for (const [query, w, h] of cases) {
        it(`gives exactly ${w}×${h} for ${query}`, async () => {
          const res = await get(`/storage/o/public/img/photo.png?${query}`);
          assert.equal(res.statusCode, 200, res.body);
          const m = await meta(res.rawPayload);
          assert.deepEqual([m.width, m.height], [w, h]);
        });
      }

      it('serves the original bytes when no transform parameter is given', async () => {
        const res = await get('/storage/o/public/img/photo.png?token=&v=1');
        assert.equal(res.statusCode, 200);
        assert.ok(res.rawPayload.equals(fx.photo));
      });
    });

    describe('format', () => {
      for (const [f, type, decoded] of [
        ['webp', 'image/webp', 'webp'],
        ['png', 'image/png', 'png'],
        ['jpeg', 'image/jpeg', 'jpeg'],
        ['avif', 'image/avif', 'heif'],
      ] as const) {
        it(`writes ${f} with Content-Type ${type} for f=${f}`, async () => {
          const res = await get(`/storage/o/public/img/photo.png?w=40&f=${f}`);
          assert.equal(res.statusCode, 200, res.body);
          assert.equal(res.headers['content-type'], type);
          assert.equal((await meta(res.rawPayload)).format, decoded);
          assert.doesNotMatch(String(res.headers.vary ?? ''), /Accept/);
        });
      }

      it('writes WebP for f=auto when Accept names image/webp, with Vary: Accept', async () => {
        const res = await get('/storage/o/public/img/photo.png?w=40&f=auto', {
          accept: 'image/avif,image/webp,image/apng,*/*;q=0.8',
        });
        assert.equal(res.headers['content-type'], 'image/webp');
        assert.equal((await meta(res.rawPayload)).format, 'webp');
        assert.match(String(res.headers.vary), /(^|, )Accept$/);
        assert.match(String(res.headers.vary), /Origin/);
      });

      it('writes AVIF for f=auto when Accept names image/avif only', async () => {
        const res = await get('/storage/o/public/img/photo.png?w=40&f=auto', { accept: 'image/avif,*/*' });
        assert.equal(res.headers['content-type'], 'image/avif');
        assert.equal((await meta(res.rawPayload)).compression, 'av1');
      });

      it('keeps the source format for f=auto without Accept, with Vary: Accept', async () => {
        const png = await get('/storage/o/public/img/photo.png?w=40&f=auto');
        assert.equal(png.headers['content-type'], 'image/png');
        assert.equal((await meta(png.rawPayload)).format, 'png');
        assert.match(String(png.headers.vary), /Accept/);
        const jpeg = await get('/storage/o/public/img/rotated.jpg?w=10&f=auto', { accept: '*/*' });
        assert.equal(jpeg.headers['content-type'], 'image/jpeg');
        assert.equal((await meta(jpeg.rawPayload)).format, 'jpeg');
      });

      it('gives fewer bytes for a lower q', async () => {
        for (const f of ['jpeg', 'webp']) {
          const low = await get(`/storage/o/public/img/photo.png?f=${f}&q=10`);
          const high = await get(`/storage/o/public/img/photo.png?f=${f}&q=90`);
          assert.ok(
            low.rawPayload.length < high.rawPayload.length,
            `${f}: ${low.rawPayload.length} vs ${high.rawPayload.length}`,
          );
        }
      });

      it('names the download after the format written', async () => {
        const res = await get('/storage/o/public/img/photo.png?w=10&f=webp');
        assert.match(String(res.headers['content-disposition']), /^inline; filename="photo\.webp"/);
      });
    });

    describe('corners, blur and orientation', () => {
      for (const f of ['png', 'webp']) {
        it(`leaves corner pixels with alpha 0 for r=full in ${f}`, async () => {
          const res = await get(`/storage/o/public/img/photo.png?w=100&h=60&r=full&f=${f}`);
          assert.equal(res.statusCode, 200, res.body);
          const img = await pixels(res.rawPayload);
          assert.deepEqual([img.width, img.height], [100, 60]);
          for (const [x, y] of [
            [0, 0],
            [99, 0],
            [0, 59],
            [99, 59],
          ] as const)
            assert.equal(pixelAt(img, x, y)[3], 0, `corner ${x},${y}`);
          assert.equal(pixelAt(img, 50, 30)[3], 255);
        });
      }

      it('lowers pixel variance with b', async () => {
        const sharpImg = await pixels((await get('/storage/o/public/img/photo.png?f=png')).rawPayload);
        const blurred = await pixels((await get('/storage/o/public/img/photo.png?f=png&b=3.5')).rawPayload);
        assert.ok(
          variance(blurred) < variance(sharpImg) / 4,
          `${variance(blurred)} vs ${variance(sharpImg)}`,
        );
      });

      it('turns an EXIF-rotated JPEG upright and strips its EXIF', async () => {
        const res = await get('/storage/o/public/img/rotated.jpg?f=png');
        const img = await pixels(res.rawPayload);
        assert.deepEqual([img.width, img.height], [20, 40]);
        const top = pixelAt(img, 10, 5);
        assert.ok((top[0] as number) > 200 && (top[2] as number) < 60, `top should be red, got ${top}`);
        const m = await meta(res.rawPayload);
        assert.equal(m.exif, undefined);
        assert.equal(res.rawPayload.includes(Buffer.from('secret location')), false);
      });
    });

    describe('refusals', () => {
      const bad: [string, string][] = [
        ['w=8193', '"w" must be an integer from 0 to 8192'],
        ['w=-1', '"w" must be an integer from 0 to 8192'],
        ['w=1.5', '"w" must be an integer from 0 to 8192'],
        ['h=9000', '"h" must be an integer from 0 to 8192'],
        ['h=abc', '"h" must be an integer from 0 to 8192'],
        ['q=0', '"q" must be an integer from 1 to 100'],
        ['q=101', '"q" must be an integer from 1 to 100'],
        ['f=gif', '"f" must be one of webp, png, jpeg, avif, auto'],
        ['r=-3', '"r" must be an integer of 0 or more, or "full"'],
        ['r=2.5', '"r" must be an integer of 0 or more, or "full"'],
        ['b=0.2', '"b" must be a number from 0.3 to 1000'],
        ['b=1000.1', '"b" must be a number from 0.3 to 1000'],
        ['b=soft', '"b" must be a number from 0.3 to 1000'],
      ];
      for (const [query, message] of bad) {
        it(`answers 400 naming the parameter for ${query}`, async () => {
          const renders = images().stats.renders;
          const res = await get(`/storage/o/public/img/photo.png?${query}`);
          assert.equal(res.statusCode, 400);
          assert.deepEqual(res.json(), {
            statusCode: 400,
            error: 'Bad Request',
            message,
            code: 'VALIDATION',
          });
          assert.equal(images().stats.renders, renders);
        });
      }

      it('answers 415 for a text file', async () => {
        const res = await get('/storage/o/public/img/notes.txt?w=10');
        assert.equal(res.statusCode, 415);
        assert.equal(res.json().code, 'NOT_AN_IMAGE');
      });

      it('answers 422 for a 20000×20000 PNG bomb, quickly', async () => {
        const started = Date.now();
        const res = await get('/storage/o/public/img/bomb.png?w=100');
        assert.equal(res.statusCode, 422);
        assert.equal(res.json().code, 'IMAGE_TOO_LARGE');
        assert.match(res.json().message, /20000×20000/);
        assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
      });

      it('answers 422 for a corrupt image', async () => {
        const res = await get('/storage/o/public/img/broken.png?w=10');
        assert.equal(res.statusCode, 422);
        assert.equal(res.json().code, 'IMAGE_CORRUPT');
      });

      it('still serves those files untransformed', async () => {
        const res = await get('/storage/o/public/img/notes.txt');
        assert.equal(res.statusCode, 200);
        assert.equal(res.body, 'not an image at all\n');
      });
    });

    describe('cache and validators', () => {
      it('returns identical bytes from the cache for a second identical request', async () => {
        const url = '/storage/o/public/img/photo.png?w=123&f=webp';
        const first = await get(url);
        const { renders, cacheHits } = images().stats;
        const second = await get(`/storage/o/public/img/photo.png?f=webp&w=123&cachebuster=2`);
        assert.equal(second.statusCode, 200);
        assert.ok(second.rawPayload.equals(first.rawPayload));
        assert.equal(second.headers.etag, first.headers.etag);
        assert.equal(images().stats.renders, renders, 'the second request rendered again');
        assert.equal(images().stats.cacheHits, cacheHits + 1);
      });

      it('answers 304 to If-None-Match with the variant ETag, without rendering', async () => {
        const first = await get('/storage/o/public/img/photo.png?w=77');
        const etag = String(first.headers.etag);
        assert.match(etag, /^"[0-9a-f]{32}"$/);
        const { renders, cacheHits } = images().stats;
        const again = await get('/storage/o/public/img/photo.png?w=77', { 'if-none-match': etag });
        assert.equal(again.statusCode, 304);
        assert.equal(again.headers.etag, etag);
        assert.equal(again.rawPayload.length, 0);
        assert.equal(images().stats.renders, renders);
        assert.equal(images().stats.cacheHits, cacheHits);
      });

      it('sets the caching headers of the plain download (public file)', async () => {
        const res = await get('/storage/o/public/img/photo.png?w=20');
        assert.match(String(res.headers['cache-control']), /^public, max-age=\d+$/);
        assert.ok(res.headers['last-modified']);
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
      });

      it('ignores a Range header and sends the whole variant', async () => {
        const res = await get('/storage/o/public/img/photo.png?w=20', { range: 'bytes=0-9' });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['accept-ranges'], 'none');
        assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
        assert.ok(res.rawPayload.length > 10);
      });

      it('answers HEAD with the variant headers and no body', async () => {
        const res = await t.app.inject({
          method: 'HEAD',
          url: '/storage/o/public/img/photo.png?w=20&f=webp',
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'image/webp');
        assert.ok(Number(res.headers['content-length']) > 0);
        assert.equal(res.rawPayload.length, 0);
      });

      it('changes the result when the source is overwritten, and drops the old variants', async () => {
        await upload('public/img/swap.png', await flat(40, 40, '#ff0000'), 'image/png');
        const before = await get('/storage/o/public/img/swap.png?w=20&f=png');
        assert.ok((await cachedFiles(t)).length > 0);
        const filesBefore = (await cachedFiles(t)).length;
        await upload('public/img/swap.png', await flat(40, 40, '#00ff00'), 'image/png');
        assert.equal((await cachedFiles(t)).length, filesBefore - 1);
        const after = await get('/storage/o/public/img/swap.png?w=20&f=png', {
          'if-none-match': String(before.headers.etag),
        });
        assert.equal(after.statusCode, 200);
        assert.notEqual(after.headers.etag, before.headers.etag);
        assert.ok(!after.rawPayload.equals(before.rawPayload));
        const px = pixelAt(await pixels(after.rawPayload), 10, 10);
        assert.ok((px[1] as number) > 200 && (px[0] as number) < 60, `expected green, got ${px}`);
      });

      it('drops the variants of a deleted source, which then answers 404', async () => {
        await upload('public/img/gone.png', await flat(30, 30), 'image/png');
        await get('/storage/o/public/img/gone.png?w=10');
        const filesBefore = (await cachedFiles(t)).length;
        const del = await t.app.inject({ method: 'DELETE', url: '/storage/o/public/img/gone.png' });
        assert.equal(del.statusCode, 204);
        assert.equal((await cachedFiles(t)).length, filesBefore - 1);
        assert.equal((await get('/storage/o/public/img/gone.png?w=10')).statusCode, 404);
      });

      it('never lists or zips variants', async () => {
        await get('/storage/o/public/img/photo.png?w=11');
        const list = await get('/storage/m/public/img/');
        assert.equal(list.statusCode, 200, list.body);
        const keys = (list.json() as { key: string }[]).map((m) => m.key).sort();
        assert.deepEqual(keys, [
          'public/img/bomb.png',
          'public/img/broken.png',
          'public/img/notes.txt',
          'public/img/photo.png',
          'public/img/rotated.jpg',
          'public/img/swap.png',
        ]);
      });
    });

    describe('access rules', () => {
      it('applies the same rules as the plain download before transforming', async () => {
        const userId = randomUUID();
        const jwt = await accessToken(t, userId);
        const { Metadata } = await upload(`user/${userId}/me.png`, await flat(50, 50), 'image/png', {
          authorization: `Bearer ${jwt}`,
        });
        const renders = images().stats.renders;
        const anonymous = await get(`/storage/o/user/${userId}/me.png?w=10`);
        assert.equal(anonymous.statusCode, 403);
        assert.equal(images().stats.renders, renders);
        const withToken = await get(`/storage/o/user/${userId}/me.png?w=10&token=${Metadata.token}`);
        assert.equal(withToken.statusCode, 200, withToken.body);
        assert.equal((await meta(withToken.rawPayload)).width, 10);
        assert.equal(withToken.headers['cache-control'], 'private, no-cache');
        const owner = await get(`/storage/o/user/${userId}/me.png?w=12`, { authorization: `Bearer ${jwt}` });
        assert.equal(owner.statusCode, 200);
      });

      it('answers 404 for a missing file the caller could read', async () => {
        const res = await get('/storage/o/public/img/nothing-here.png?w=10');
        assert.equal(res.statusCode, 404);
      });
    });
  });
}

for (const [db, backend] of dbBackendPairs()) imageRoutes(db, backend);
