/**
 * Images for the image tests, generated with sharp (and one PNG written by hand) so no binary fixtures
 * live in the repository.
 */
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';

/** A noisy colour image: noise makes byte counts respond to quality and blur measurable. */
export function photo(
  width: number,
  height: number,
  format: 'jpeg' | 'png' | 'webp' = 'png',
): Promise<Buffer> {
  return sharp({
    create: {
      width,
      height,
      channels: 3,
      background: '#000',
      noise: { type: 'gaussian', mean: 128, sigma: 50 },
    },
  })
    .toFormat(format)
    .toBuffer();
}

/** A flat-colour opaque image. */
export function flat(
  width: number,
  height: number,
  colour = '#3366cc',
  format: 'jpeg' | 'png' = 'png',
): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: colour } })
    .toFormat(format)
    .toBuffer();
}

/**
 * A JPEG stored 40×20 (left half red, right half blue) with EXIF orientation 6 ("rotate 90° clockwise
 * to view"), plus GPS-like EXIF text, so upright output is 20×40 with red on top.
 */
export async function exifRotatedJpeg(): Promise<Buffer> {
  const red = await sharp({ create: { width: 20, height: 20, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  return sharp({ create: { width: 40, height: 20, channels: 3, background: '#0000ff' } })
    .composite([{ input: red, left: 0, top: 0 }])
    .jpeg({ quality: 95 })
    .withMetadata({ orientation: 6 })
    .withExif({ IFD0: { Copyright: 'gatehouse-test', ImageDescription: 'secret location' } })
    .toBuffer();
}

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/**
 * A valid 1-bit PNG of `size`×`size` black pixels: ~50 KB on disk for 20000×20000 (400 MP, 1.6 GB as
 * RGBA once decoded) — a decompression bomb, written directly because encoding it with sharp takes ~25 s.
 */
export function pngBomb(size = 20000): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // greyscale
  const rows = Buffer.alloc(size * (1 + Math.ceil(size / 8)));
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Raw RGBA pixels and size of an encoded image. */
export async function pixels(
  data: Buffer,
): Promise<{ data: Buffer; width: number; height: number; channels: number }> {
  const { data: raw, info } = await sharp(data).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data: raw, width: info.width, height: info.height, channels: info.channels };
}

/** RGBA of one pixel. */
export function pixelAt(
  img: { data: Buffer; width: number; channels: number },
  x: number,
  y: number,
): number[] {
  const i = (y * img.width + x) * img.channels;
  return [...img.data.subarray(i, i + img.channels)];
}

/** Variance of all colour samples (alpha ignored). */
export function variance(img: { data: Buffer; channels: number }): number {
  let n = 0;
  let sum = 0;
  let sq = 0;
  for (let i = 0; i < img.data.length; i++) {
    if (img.channels === 4 && i % 4 === 3) continue;
    const v = img.data[i] as number;
    n++;
    sum += v;
    sq += v * v;
  }
  const mean = sum / n;
  return sq / n - mean * mean;
}

/**
 * A ~1 KB SVG that librsvg takes many seconds to draw at its own size (1000×1000): stacked turbulence
 * and blur filters, each computed over every pixel. sharp's `timeout` does not interrupt it, since the
 * whole drawing is one step of the SVG loader.
 */
export function hostileSvg(layers = 4, size = 1000): Buffer {
  let filters = '';
  for (let i = 0; i < layers; i++)
    filters += `<feTurbulence baseFrequency="0.9" numOctaves="10" seed="${i}" result="t${i}"/><feGaussianBlur in="t${i}" stdDeviation="50"/>`;
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" viewBox="0 0 ${size} ${size}">` +
      `<filter id="f" x="0" y="0" width="1" height="1">${filters}</filter>` +
      `<rect width="${size}" height="${size}" filter="url(#f)"/></svg>`,
  );
}

/** A small, cheap SVG: two rectangles. */
export const SMALL_SVG = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="20" height="20" fill="#f00"/><rect x="20" width="20" height="20" fill="#00f"/></svg>',
);
