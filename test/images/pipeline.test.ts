import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import sharp from 'sharp';
import { AppError } from '../../src/errors.ts';
import type { FormatChoice, ImageParams } from '../../src/storage/images/params.ts';
import {
  imageError,
  NeedsSvgLane,
  type RenderLimits,
  RenderTimedOut,
  renderImage,
  targetSize,
} from '../../src/storage/images/pipeline.ts';
import { exifRotatedJpeg, flat, photo, pixelAt, pixels, pngBomb, variance } from './fixtures.ts';

const limits: RenderLimits = {
  maxPixels: 50_000_000,
  maxOutputPixels: 16_777_216,
  allowEnlargement: false,
  timeoutSeconds: 30,
  svg: 'render',
};
const enlarging: RenderLimits = { ...limits, allowEnlargement: true };

function render(input: Buffer, params: ImageParams = {}, choice: FormatChoice = 'source', l = limits) {
  return renderImage(input, params, choice, l);
}

async function rejectsWith(p: Promise<unknown>, code: string, status: number): Promise<AppError> {
  const err = await p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`);
  assert.equal(err.code, code);
  assert.equal(err.statusCode, status);
  return err;
}

describe('image pipeline', () => {
  let png300x200: Buffer;
  before(async () => {
    png300x200 = await photo(300, 200);
  });

  describe('size', () => {
    it('keeps the source size when neither w nor h is given', async () => {
      const out = await render(png300x200);
      const m = await sharp(out.data).metadata();
      assert.deepEqual([m.width, m.height], [300, 200]);
    });

    it('follows the aspect ratio when only w is given', async () => {
      const m = await sharp((await render(png300x200, { width: 150 })).data).metadata();
      assert.deepEqual([m.width, m.height], [150, 100]);
    });

    it('follows the aspect ratio when only h is given', async () => {
      const m = await sharp((await render(png300x200, { height: 50 })).data).metadata();
      assert.deepEqual([m.width, m.height], [75, 50]);
    });

    it('cover-crops to exactly w×h when both are given', async () => {
      const m = await sharp((await render(png300x200, { width: 64, height: 64 })).data).metadata();
      assert.deepEqual([m.width, m.height], [64, 64]);
    });

    it('upscales when asked for more pixels than the source has, if enlargement is allowed', async () => {
      const m = await sharp((await render(png300x200, { width: 600 }, 'source', enlarging)).data).metadata();
      assert.deepEqual([m.width, m.height], [600, 400]);
    });

    it('gives no more pixels than the source has when enlargement is not allowed', async () => {
      const wider = await sharp((await render(png300x200, { width: 600 })).data).metadata();
      assert.deepEqual([wider.width, wider.height], [300, 200]);
      // Both sides asked: the asked ratio (6:1) at the source's own resolution.
      const strip = await sharp((await render(png300x200, { width: 600, height: 100 })).data).metadata();
      assert.deepEqual([strip.width, strip.height], [300, 50]);
    });

    it('answers the 1×1 → 8192×6100 upscale with the 1×1 image, at once', async () => {
      const dot = await flat(1, 1);
      const started = Date.now();
      const out = await render(dot, { width: 8192, height: 6100 }, 'png');
      assert.deepEqual([out.width, out.height], [1, 1]);
      assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`);
    });

    it('computes the followed side by rounding and never below 1 pixel', () => {
      assert.deepEqual(targetSize({ width: 1000, height: 3 }, { width: 100 }), { width: 100, height: 1 });
      assert.deepEqual(targetSize({ width: 333, height: 500 }, { width: 100 }), { width: 100, height: 150 });
    });
  });

  describe('orientation and metadata', () => {
    it('applies EXIF orientation first, so a rotated JPEG comes out upright', async () => {
      const input = await exifRotatedJpeg();
      assert.equal((await sharp(input).metadata()).orientation, 6);
      const out = await render(input, {}, 'png');
      const img = await pixels(out.data);
      assert.deepEqual([img.width, img.height], [20, 40]);
      const top = pixelAt(img, 10, 5);
      const bottom = pixelAt(img, 10, 35);
      assert.ok((top[0] as number) > 200 && (top[2] as number) < 60, `top should be red, got ${top}`);
      assert.ok(
        (bottom[2] as number) > 200 && (bottom[0] as number) < 60,
        `bottom should be blue, got ${bottom}`,
      );
    });

    it('measures w against the upright image of an EXIF-rotated input', async () => {
      const out = await render(await exifRotatedJpeg(), { width: 10 });
      const m = await sharp(out.data).metadata();
      assert.deepEqual([m.width, m.height], [10, 20]);
    });

    it('strips EXIF from the output', async () => {
      const out = await render(await exifRotatedJpeg(), { width: 10 });
      const m = await sharp(out.data).metadata();
      assert.equal(m.exif, undefined);
      assert.equal(m.orientation, undefined);
      assert.equal(out.data.includes(Buffer.from('secret location')), false);
    });
  });

  describe('format', () => {
    for (const f of ['webp', 'png', 'jpeg', 'avif'] as const) {
      it(`writes ${f} when f=${f}`, async () => {
        const out = await render(png300x200, { width: 40 }, f);
        assert.equal(out.format, f);
        const m = await sharp(out.data).metadata();
        assert.equal(m.format, f === 'avif' ? 'heif' : f);
        if (f === 'avif') assert.equal(m.compression, 'av1');
      });
    }

    it('keeps the source format when no format is chosen', async () => {
      const jpeg = await photo(50, 50, 'jpeg');
      const out = await render(jpeg, { width: 20 });
      assert.equal(out.format, 'jpeg');
      assert.equal((await sharp(out.data).metadata()).format, 'jpeg');
    });

    it('writes PNG for an SVG source (the format actually written)', async () => {
      const svg = Buffer.from(
        '<svg xmlns="http://www.w3.org/2000/svg" width="30" height="10"><rect width="30" height="10" fill="red"/></svg>',
      );
      const out = await render(svg);
      assert.equal(out.format, 'png');
      const m = await sharp(out.data).metadata();
      assert.deepEqual([m.format, m.width, m.height], ['png', 30, 10]);
    });

    it('rasterises an enlarged SVG at the target size (sharp scales vector input), keeping its edges sharp', async () => {
      const svg = Buffer.from(
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="5" height="10" fill="#000"/><rect x="5" width="5" height="10" fill="#fff"/></svg>',
      );
      const img = await pixels((await render(svg, { width: 400 }, 'png')).data);
      assert.deepEqual([img.width, img.height], [400, 400]);
      // Upscaling a 10-pixel raster would smear the edge over ~40 pixels; a vector render keeps it within 2.
      assert.ok((pixelAt(img, 196, 200)[0] as number) < 10, `left of the edge: ${pixelAt(img, 196, 200)}`);
      assert.ok((pixelAt(img, 203, 200)[0] as number) > 245, `right of the edge: ${pixelAt(img, 203, 200)}`);
    });

    it('gives fewer bytes for a lower q', async () => {
      for (const f of ['jpeg', 'webp', 'avif'] as const) {
        const low = await render(png300x200, { quality: 10 }, f);
        const high = await render(png300x200, { quality: 90 }, f);
        assert.ok(
          low.data.length < high.data.length,
          `${f}: q=10 ${low.data.length} >= q=90 ${high.data.length}`,
        );
      }
    });

    it('quantises PNG only when q is given', async () => {
      const lossless = await render(png300x200, {}, 'png');
      const quantised = await render(png300x200, { quality: 20 }, 'png');
      assert.ok(quantised.data.length < lossless.data.length);
      assert.equal((await sharp(quantised.data).metadata()).isPalette, true);
    });
  });

  describe('rounded corners and blur', () => {
    for (const f of ['png', 'webp'] as const) {
      it(`makes the corners transparent with r=full in ${f}`, async () => {
        const out = await render(await flat(80, 40), { radius: 'full' }, f);
        const img = await pixels(out.data);
        assert.equal(img.channels, 4);
        for (const [x, y] of [
          [0, 0],
          [79, 0],
          [0, 39],
          [79, 39],
        ] as const)
          assert.equal(pixelAt(img, x, y)[3], 0, `corner ${x},${y}`);
        assert.equal(pixelAt(img, 40, 20)[3], 255);
      });
    }

    it('rounds the corners of the resized, upright image', async () => {
      const out = await render(await exifRotatedJpeg(), { width: 10, radius: 'full' }, 'png');
      const img = await pixels(out.data);
      assert.deepEqual([img.width, img.height], [10, 20]);
      assert.equal(pixelAt(img, 0, 0)[3], 0);
      assert.equal(pixelAt(img, 9, 19)[3], 0);
      assert.equal(pixelAt(img, 5, 10)[3], 255);
    });

    it('leaves a small radius only at the very corner', async () => {
      const img = await pixels((await render(await flat(80, 40), { radius: 4 }, 'png')).data);
      assert.equal(pixelAt(img, 0, 0)[3], 0);
      assert.equal(pixelAt(img, 10, 0)[3], 255);
    });

    it('fills cut corners with white in JPEG, which has no alpha', async () => {
      const img = await pixels(
        (await render(await flat(80, 40, '#000000'), { radius: 'full' }, 'jpeg')).data,
      );
      const corner = pixelAt(img, 0, 0);
      assert.ok((corner[0] as number) > 240, `corner should be white, got ${corner}`);
      const centre = pixelAt(img, 40, 20);
      assert.ok((centre[0] as number) < 15, `centre should stay black, got ${centre}`);
    });

    it('turns transparent pixels white when writing JPEG', async () => {
      const clear = await sharp({ create: { width: 10, height: 10, channels: 4, background: '#00000000' } })
        .png()
        .toBuffer();
      const img = await pixels((await render(clear, {}, 'jpeg')).data);
      assert.ok((pixelAt(img, 5, 5)[0] as number) > 240);
    });

    it('lowers pixel variance with b', async () => {
      const before = variance(await pixels((await render(png300x200, {}, 'png')).data));
      const small = variance(await pixels((await render(png300x200, { blur: 2 }, 'png')).data));
      const large = variance(await pixels((await render(png300x200, { blur: 50 }, 'png')).data));
      assert.ok(small < before / 4, `b=2: ${small} vs ${before}`);
      assert.ok(large < small, `b=50: ${large} vs b=2: ${small}`);
    });

    it('combines a large blur with rounded corners at the exact requested size', async () => {
      const out = await render(
        await photo(300, 200),
        { blur: 80, radius: 'full', width: 90, height: 60 },
        'webp',
      );
      const img = await pixels(out.data);
      assert.deepEqual([img.width, img.height], [90, 60]);
      assert.equal(pixelAt(img, 0, 0)[3], 0);
      assert.equal(pixelAt(img, 45, 30)[3], 255);
    });

    it('blurs with the largest sigma quickly and keeps the requested size', async () => {
      const started = Date.now();
      const out = await render(await photo(1200, 800, 'jpeg'), { blur: 1000, width: 600 }, 'png');
      const m = await sharp(out.data).metadata();
      assert.deepEqual([m.width, m.height], [600, 400]);
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
    });
  });

  describe('limits and bad input', () => {
    it('refuses a 20000×20000 PNG bomb with 422 without decoding it', async () => {
      const bomb = pngBomb();
      assert.ok(bomb.length < 100_000);
      const before = process.memoryUsage().rss;
      const err = await rejectsWith(render(bomb, { width: 10 }), 'IMAGE_TOO_LARGE', 422);
      assert.match(err.message, /20000×20000/);
      // Decoding would take gigabytes; reading the header takes nothing worth measuring.
      assert.ok(process.memoryUsage().rss - before < 200 * 1024 * 1024);
    });

    it('refuses a source larger than the pixel limit with 422', async () => {
      await rejectsWith(
        render(png300x200, {}, 'source', { ...limits, maxPixels: 1000 }),
        'IMAGE_TOO_LARGE',
        422,
      );
    });

    it('refuses a result larger than the output pixel limit with 422', async () => {
      const tall = await flat(1, 100);
      const err = await rejectsWith(
        render(tall, { width: 8192 }, 'source', enlarging),
        'IMAGE_TOO_LARGE',
        422,
      );
      assert.match(err.message, /8192×819200 pixels; results of more than 16777216/);
      const dot = await flat(1, 1);
      await rejectsWith(render(dot, { width: 8192, height: 6100 }, 'png', enlarging), 'IMAGE_TOO_LARGE', 422);
    });

    it('refuses an SVG drawn larger than the output pixel limit with 422', async () => {
      const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>');
      await rejectsWith(render(svg, { width: 8192, height: 6100 }, 'png'), 'IMAGE_TOO_LARGE', 422);
    });

    it('refuses SVG input with 415 when SVG is off, and hands it to the SVG lane when asked to', async () => {
      const svg = Buffer.from(
        '<svg xmlns="http://www.w3.org/2000/svg" width="30" height="10"><rect width="30" height="10"/></svg>',
      );
      const err = await rejectsWith(
        render(svg, {}, 'png', { ...limits, svg: 'refuse' }),
        'NOT_AN_IMAGE',
        415,
      );
      assert.match(err.message, /SVG files are not transformed/);
      await assert.rejects(render(svg, {}, 'png', { ...limits, svg: 'reroute' }), NeedsSvgLane);
      // A raster image is rendered in either mode.
      const out = await render(png300x200, { width: 30 }, 'png', { ...limits, svg: 'refuse' });
      assert.equal(out.width, 30);
    });

    it('refuses an SVG that refers to a file or a URL with 422 IMAGE_SVG_UNSAFE', async () => {
      for (const href of ['file:///etc/passwd', 'http://127.0.0.1:9/x.png']) {
        const svg = Buffer.from(
          `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10"><image xlink:href="${href}" width="10" height="10"/></svg>`,
        );
        await rejectsWith(render(svg, {}, 'png'), 'IMAGE_SVG_UNSAFE', 422);
      }
    });

    it('refuses a text file with 415', async () => {
      await rejectsWith(render(Buffer.from('just some text, not an image\n')), 'NOT_AN_IMAGE', 415);
    });

    it('refuses an empty file with 415', async () => {
      await rejectsWith(render(Buffer.alloc(0)), 'NOT_AN_IMAGE', 415);
    });

    it('refuses a corrupt PNG with 422', async () => {
      const good = await photo(40, 40);
      const broken = Buffer.concat([good.subarray(0, 60), Buffer.alloc(200, 7)]);
      await rejectsWith(render(broken), 'IMAGE_CORRUPT', 422);
    });

    it('refuses a truncated JPEG with 422', async () => {
      const good = await photo(200, 200, 'jpeg');
      await rejectsWith(render(good.subarray(0, good.length / 2)), 'IMAGE_CORRUPT', 422);
    });

    it('classifies a failure by what it is, never by its words: a run out of time is 422 IMAGE_TIMEOUT, any other 422 IMAGE_CORRUPT', () => {
      assert.equal(imageError(new RenderTimedOut(new Error('timeout: 5% complete'))).code, 'IMAGE_TIMEOUT');
      // The words of libvips' timeout, or of a size limit, on a failure that is neither.
      assert.equal(imageError(new Error('timeout: 5% complete')).code, 'IMAGE_CORRUPT');
      assert.equal(imageError(new Error('Input image exceeds pixel limit')).code, 'IMAGE_CORRUPT');
      assert.equal(imageError(new Error('VipsJpeg: premature end of JPEG image')).code, 'IMAGE_CORRUPT');
    });

    it('refuses a result longer than its output format holds before rendering, saying which limit', async () => {
      const tall = await flat(1, 20_000);
      const err = await rejectsWith(render(tall, {}, 'webp'), 'IMAGE_TOO_LARGE', 422);
      assert.match(err.message, /1×20000 pixels; the webp format holds at most 16383 pixels a side/);
      // PNG holds it.
      assert.equal((await render(tall, {}, 'png')).height, 20_000);
    });

    it('refuses an SVG longer than librsvg draws before decoding it, saying so', async () => {
      const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="40000" height="2"/>');
      const err = await rejectsWith(render(svg, { width: 100 }, 'png'), 'IMAGE_TOO_LARGE', 422);
      assert.match(err.message, /40000×2 pixels; SVGs longer than 32767 pixels a side/);
    });

    it('refuses formats whose loaders are not meant for untrusted input with 415', async () => {
      const ppm = Buffer.from('P3\n2 2\n255\n0 0 0 0 0 0 0 0 0 0 0 0\n');
      await rejectsWith(render(ppm), 'NOT_AN_IMAGE', 415);
    });
  });
});
