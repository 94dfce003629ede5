/**
 * The sharp pipeline: one source image in, one transformed image out. It runs inside a render process
 * (render-child.ts), never in the service's own process. The header is read first so an oversized image
 * or a decompression bomb is refused (422) before any pixel is decoded; every sharp failure becomes a
 * 415 or 422, never a 500.
 */
import sharp, { type Metadata, type Sharp } from 'sharp';
import { AppError } from '../../errors.ts';
import type { OutputFormat } from './formats.ts';
import type { FormatChoice, ImageParams } from './params.ts';
import { unsafeSvgReason } from './svg.ts';

export type { OutputFormat };

export const DEFAULT_QUALITY = 80;

/**
 * What becomes of input that is not a raster image (so possibly SVG): `refuse` it (415), send it to
 * the SVG lane (`reroute`, see NeedsSvgLane), or `render` it after the safety check of svg.ts.
 */
export type SvgMode = 'refuse' | 'reroute' | 'render';

export interface RenderLimits {
  /** Largest width × height of the source. */
  maxPixels: number;
  /** Largest width × height of the result. */
  maxOutputPixels: number;
  /** Whether a raster source may come out larger than it is (vector sources always may). */
  allowEnlargement: boolean;
  timeoutSeconds: number;
  svg: SvgMode;
}

/** Thrown in `reroute` mode for input that is not a raster image: it belongs to the SVG lane. */
export class NeedsSvgLane extends Error {
  constructor() {
    super('the input is not a raster image; it is rendered in the SVG lane');
    this.name = 'NeedsSvgLane';
  }
}

export interface RenderResult {
  data: Buffer;
  format: OutputFormat;
  width: number;
  height: number;
}

/**
 * Input formats sharp may decode, by libvips loader. Everything else (libvips' own `.v` format, PPM,
 * FITS, Matrix, CSV…) is blocked: those loaders are not meant for untrusted input.
 */
const ALLOWED_LOADERS = [
  'VipsForeignLoadJpegBuffer',
  'VipsForeignLoadPngBuffer',
  'VipsForeignLoadWebpBuffer',
  'VipsForeignLoadNsgifBuffer',
  'VipsForeignLoadHeifBuffer',
  'VipsForeignLoadTiffBuffer',
  'VipsForeignLoadSvgBuffer',
];

let configured = false;

/**
 * Process-wide sharp settings, applied once: only the loaders above, and no libvips operation cache
 * (each source arrives as a fresh buffer, so the cache would only hold up to 50 MB of decoded images
 * that are never asked for again; finished variants are cached by VariantCache instead).
 */
export function configureSharp(): void {
  if (configured) return;
  sharp.block({ operation: ['VipsForeignLoad'] });
  sharp.unblock({ operation: ALLOWED_LOADERS });
  sharp.cache(false);
  configured = true;
}

/** The format written when the client did not choose one: the source's, where browsers show it. */
function sourceOutput(format: string | undefined): OutputFormat {
  switch (format) {
    case 'jpeg':
    case 'png':
    case 'webp':
    case 'gif':
      return format;
    case 'heif':
      // Only AV1-coded HEIF (AVIF) gets this far; HEVC (HEIC) is refused as unsupported.
      return 'avif';
    default:
      // TIFF and SVG: PNG keeps every pixel and is shown everywhere.
      return 'png';
  }
}

const INPUT_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'heif', 'tiff', 'svg']);

const HEIF_BRANDS = new Set(['avif', 'avis', 'heic', 'heix', 'mif1', 'msf1']);

/**
 * True when the bytes start like one of the raster formats transformed (PNG, JPEG, GIF, WebP,
 * HEIF/AVIF, TIFF). Anything else may be SVG, whose cost has no bound that can be read from a header,
 * so it never reaches libvips outside the SVG lane.
 */
export function looksRaster(b: Buffer): boolean {
  const at = (offset: number, text: string) => b.toString('latin1', offset, offset + text.length) === text;
  if (b.length < 12) return false;
  if (at(0, '\x89PNG\r\n\x1a\n')) return true;
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return true;
  if (at(0, 'GIF87a') || at(0, 'GIF89a')) return true;
  if (at(0, 'RIFF') && at(8, 'WEBP')) return true;
  if (at(4, 'ftyp') && HEIF_BRANDS.has(b.toString('latin1', 8, 12))) return true;
  return at(0, 'II*\0') || at(0, 'MM\0*');
}

/**
 * A sharp run that failed once its whole time budget was spent: libvips stopped it (sharp's `timeout`,
 * checked against elapsed whole seconds, so never sooner than the budget).
 */
export class RenderTimedOut extends Error {
  constructor(cause: unknown) {
    super('the image transformation ran out of time', { cause });
    this.name = 'RenderTimedOut';
  }
}

/**
 * Runs one sharp pipeline under a budget of `seconds`; a failure that comes once the budget is spent is
 * RenderTimedOut. sharp and libvips give their errors no code or class, only words; the clock says it.
 */
async function timed<T>(seconds: number, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await run();
  } catch (err) {
    if (seconds > 0 && performance.now() - started >= seconds * 1000) throw new RenderTimedOut(err);
    throw err;
  }
}

/**
 * A failure of a transformation as the client sees it. Everything that can be told before decoding is
 * refused before (the type by its bytes, the source's and the result's size by the header and the output
 * format's limits), so what remains of sharp's failures is the time budget (RenderTimedOut) or data that
 * does not decode (IMAGE_CORRUPT), whatever their words.
 */
export function imageError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof RenderTimedOut) return new AppError('IMAGE_TIMEOUT', undefined, { cause: err });
  return new AppError('IMAGE_CORRUPT', undefined, { cause: err });
}

/** The longest side each output format holds (sharp refuses a larger result after all the work). */
const MAX_SIDE: Record<OutputFormat, number> = {
  jpeg: 65_535,
  webp: 16_383,
  gif: 65_535,
  avif: 16_384,
  png: Number.POSITIVE_INFINITY,
};

/** The longest side of an SVG that librsvg draws (sharp refuses a larger one when decoding). */
const MAX_SVG_SIDE = 32_767;

function tooLarge(what: string, width: number, height: number, max: number): AppError {
  return new AppError(
    'IMAGE_TOO_LARGE',
    what === 'image'
      ? `The image is ${width}×${height} pixels; images of more than ${max} pixels are not transformed.`
      : `The result would be ${width}×${height} pixels; results of more than ${max} pixels are not made.`,
  );
}

/** Size of the output: both given → exactly that (cover crop); one given → the other keeps the ratio. */
export function targetSize(
  src: { width: number; height: number },
  params: Pick<ImageParams, 'width' | 'height'>,
): { width: number; height: number } {
  const { width: w, height: h } = params;
  if (w && h) return { width: w, height: h };
  if (w) return { width: w, height: Math.max(1, Math.round((src.height * w) / src.width)) };
  if (h) return { width: Math.max(1, Math.round((src.width * h) / src.height)), height: h };
  return { width: src.width, height: src.height };
}

/**
 * The size asked for, made no larger than the source: scaled down as a whole, so the result keeps the
 * asked aspect ratio (a cover crop at the source's own resolution) without inventing pixels.
 */
export function withoutEnlargement(
  size: { width: number; height: number },
  src: { width: number; height: number },
): { width: number; height: number } {
  if (size.width <= src.width && size.height <= src.height) return size;
  const k = Math.min(src.width / size.width, src.height / size.height);
  return {
    width: Math.max(1, Math.min(src.width, Math.round(size.width * k))),
    height: Math.max(1, Math.min(src.height, Math.round(size.height * k))),
  };
}

/**
 * Above this sigma the blur runs on a copy shrunk by sigma / DIRECT_BLUR_SIGMA and is enlarged back:
 * libvips' cost grows with sigma (σ=1000 on a 3 MP image takes minutes), while a Gaussian that wide
 * has removed every detail the shrink would lose, so the result looks the same.
 */
const DIRECT_BLUR_SIGMA = 10;

/**
 * Cuts the corners: transparent where the format has alpha (a `dest-in` mask), white in JPEG (white
 * corner pieces drawn over, because sharp flattens before it composites).
 */
function roundCorners(
  img: Sharp,
  size: { width: number; height: number },
  r: number | 'full',
  format: OutputFormat,
): Sharp {
  const { width: w, height: h } = size;
  const half = Math.min(w, h) / 2;
  const radius = r === 'full' ? half : Math.min(r, half);
  const rect = `<rect x="0" y="0" width="${w}" height="${h}" rx="${radius}" ry="${radius}"/>`;
  const open = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">`;
  if (format === 'jpeg') {
    // The frame minus the rounded rectangle (even-odd), painted white.
    const frame = `M0 0H${w}V${h}H0Z`;
    const inner =
      `M${radius} 0H${w - radius}A${radius} ${radius} 0 0 1 ${w} ${radius}V${h - radius}` +
      `A${radius} ${radius} 0 0 1 ${w - radius} ${h}H${radius}A${radius} ${radius} 0 0 1 0 ${h - radius}` +
      `V${radius}A${radius} ${radius} 0 0 1 ${radius} 0Z`;
    const svg = `${open}<path fill="#fff" fill-rule="evenodd" d="${frame}${inner}"/></svg>`;
    return img.composite([{ input: Buffer.from(svg) }]);
  }
  return img.ensureAlpha().composite([{ input: Buffer.from(`${open}${rect}</svg>`), blend: 'dest-in' }]);
}

/** Renders `params` on `input`. Throws AppError (415, 422) for anything sharp cannot or may not do. */
export async function renderImage(
  input: Buffer,
  params: ImageParams,
  choice: FormatChoice,
  limits: RenderLimits,
): Promise<RenderResult> {
  configureSharp();
  if (input.length === 0) throw new AppError('NOT_AN_IMAGE');
  if (!looksRaster(input)) {
    if (limits.svg === 'refuse')
      throw new AppError(
        'NOT_AN_IMAGE',
        'The file is not a raster image; SVG files are not transformed here.',
      );
    if (limits.svg === 'reroute') throw new NeedsSvgLane();
    const unsafe = unsafeSvgReason(input.toString('utf8'));
    if (unsafe) throw new AppError('IMAGE_SVG_UNSAFE', `The SVG is not rasterised: it contains ${unsafe}.`);
  }
  // The header alone: decoding nothing yet is what makes a 20000×20000 bomb cheap to refuse.
  let meta: Metadata;
  try {
    meta = await sharp(input, { limitInputPixels: false }).metadata();
  } catch (err) {
    // Bytes that start like a raster format and whose header cannot be read are a broken image; any
    // other input (an SVG lane's text that is no SVG) is not an image at all.
    throw new AppError(looksRaster(input) ? 'IMAGE_CORRUPT' : 'NOT_AN_IMAGE', undefined, { cause: err });
  }
  if (!meta.format || !INPUT_FORMATS.has(meta.format) || !meta.width || !meta.height)
    throw new AppError('NOT_AN_IMAGE');
  if (meta.format === 'heif' && meta.compression !== 'av1') throw new AppError('NOT_AN_IMAGE');
  // EXIF orientation first: every size below is measured on the upright image.
  const upright = meta.autoOrient ?? { width: meta.width, height: meta.height };
  if (upright.width * upright.height > limits.maxPixels)
    throw tooLarge('image', upright.width, upright.height, limits.maxPixels);
  if (meta.format === 'svg' && Math.max(upright.width, upright.height) > MAX_SVG_SIDE)
    throw new AppError(
      'IMAGE_TOO_LARGE',
      `The SVG is ${upright.width}×${upright.height} pixels; SVGs longer than ${MAX_SVG_SIDE} pixels a side are not drawn.`,
    );

  let size = targetSize(upright, params);
  // A vector source is drawn at the size asked for; a raster one would only be blown up.
  if (meta.format !== 'svg' && !limits.allowEnlargement) size = withoutEnlargement(size, upright);
  if (size.width * size.height > limits.maxOutputPixels)
    throw tooLarge('result', size.width, size.height, limits.maxOutputPixels);
  const format = choice === 'source' ? sourceOutput(meta.format) : choice;
  if (Math.max(size.width, size.height) > MAX_SIDE[format])
    throw new AppError(
      'IMAGE_TOO_LARGE',
      `The result would be ${size.width}×${size.height} pixels; the ${format} format holds at most ${MAX_SIDE[format]} pixels a side.`,
    );

  try {
    const open = () =>
      sharp(input, {
        limitInputPixels: limits.maxPixels,
        failOn: 'truncated',
        sequentialRead: true,
        autoOrient: true,
      }).timeout({ seconds: limits.timeoutSeconds });
    const resize = size.width !== upright.width || size.height !== upright.height;
    let img: Sharp;
    const sigma = params.blur;
    if (sigma !== undefined && sigma > DIRECT_BLUR_SIGMA) {
      const shrink = sigma / DIRECT_BLUR_SIGMA;
      const small = await timed(limits.timeoutSeconds, () =>
        open()
          .resize(
            Math.max(1, Math.round(size.width / shrink)),
            Math.max(1, Math.round(size.height / shrink)),
            { fit: 'cover' },
          )
          .blur(DIRECT_BLUR_SIGMA)
          .raw()
          .toBuffer({ resolveWithObject: true }),
      );
      img = sharp(small.data, {
        raw: { width: small.info.width, height: small.info.height, channels: small.info.channels },
      })
        .resize(size.width, size.height, { fit: 'fill' })
        .timeout({ seconds: limits.timeoutSeconds });
    } else {
      img = open();
      if (resize) img = img.resize(size.width, size.height, { fit: 'cover', position: 'centre' });
      if (sigma !== undefined) img = img.blur(sigma);
    }

    // JPEG has no alpha: transparent pixels become white, not libvips' default black.
    if (format === 'jpeg' && meta.hasAlpha) img = img.flatten({ background: '#ffffff' });
    if (params.radius !== undefined) img = roundCorners(img, size, params.radius, format);

    const quality = params.quality ?? DEFAULT_QUALITY;
    switch (format) {
      case 'jpeg':
        img = img.jpeg({ quality });
        break;
      case 'webp':
        img = img.webp({ quality });
        break;
      case 'avif':
        // Effort 2 of 9: the default (4) took ~10× longer on a 1 MP photo for no smaller output.
        img = img.avif({ quality, effort: 2 });
        break;
      case 'png':
        // PNG is lossless unless a quality is asked for; then it is palette-quantised (as HBP did).
        img = params.quality === undefined ? img.png() : img.png({ palette: true, quality });
        break;
      case 'gif':
        img = img.gif();
        break;
    }
    // sharp strips EXIF, GPS, XMP and ICC metadata from output unless asked to keep it.
    const { data, info } = await timed(limits.timeoutSeconds, () =>
      img.toBuffer({ resolveWithObject: true }),
    );
    return { data, format, width: info.width, height: info.height };
  } catch (err) {
    throw imageError(err);
  }
}
