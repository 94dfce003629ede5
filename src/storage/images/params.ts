/**
 * Image transformation parameters of `GET /storage/o/<file>`: which requests are transforms, how each
 * parameter is validated (a 400 naming the parameter and its range), and the normalised form that keys
 * the variant cache and the variant ETag.
 */
import { Type } from '@sinclair/typebox';
import { AppError } from '../../errors.ts';

export const MAX_DIMENSION = 8192;

/** Formats a client may ask for with `f`. */
export const REQUESTABLE_FORMATS = ['webp', 'png', 'jpeg', 'avif', 'auto'] as const;
export type RequestedFormat = (typeof REQUESTABLE_FORMATS)[number];

/** `f` after content negotiation: a concrete format, or the source's own format. */
export type FormatChoice = Exclude<RequestedFormat, 'auto'> | 'source';

/** The parameters that make a GET a transform. `token` is not one: it belongs to the storage rules. */
const TRANSFORM_KEYS = ['w', 'h', 'q', 'f', 'r', 'b'] as const;

export interface ImageParams {
  /** Undefined (or 0 in the query): follow the aspect ratio. */
  width?: number;
  height?: number;
  /** Undefined: the format's default (80 for lossy formats, lossless PNG). */
  quality?: number;
  format?: RequestedFormat;
  /** Corner radius in pixels, or `full` for a circle / stadium; undefined or 0: square corners. */
  radius?: number | 'full';
  /** Gaussian blur sigma. */
  blur?: number;
}

/**
 * Query-string schema for the OpenAPI document. Values are declared as strings because they are
 * checked here, with messages that state the allowed range; unknown parameters stay allowed (they are
 * cache-busters), so a route using these properties must not set `additionalProperties: false`.
 */
export const imageQueryProperties = {
  w: Type.Optional(
    Type.String({ description: 'Width in pixels, 0..8192; 0 or absent follows the aspect ratio.' }),
  ),
  h: Type.Optional(
    Type.String({
      description: 'Height in pixels, 0..8192; with w too, the image is cover-cropped, centred.',
    }),
  ),
  q: Type.Optional(Type.String({ description: 'Quality 1..100 (default 80 for lossy formats).' })),
  f: Type.Optional(
    Type.String({
      description:
        'Output format: webp, png, jpeg, avif or auto (WebP or AVIF when Accept names them, else the source format).',
    }),
  ),
  r: Type.Optional(Type.String({ description: 'Corner radius: an integer ≥ 0, or `full`.' })),
  b: Type.Optional(Type.String({ description: 'Gaussian blur sigma, 0.3..1000.' })),
};

type Query = Readonly<Record<string, unknown>>;

function present(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  return v !== undefined && v !== null && String(v) !== '';
}

/** True when the request asks for a transformation: any of w, h, q, f, r, b is given and non-empty. */
export function isTransformRequest(query: Query): boolean {
  return TRANSFORM_KEYS.some((k) => present(query[k]));
}

function invalid(name: string, rule: string): never {
  throw new AppError('VALIDATION', `"${name}" must be ${rule}`);
}

/** The single text value of a parameter, or undefined when absent or empty. */
function single(query: Query, name: string): string | undefined {
  const v = query[name];
  if (Array.isArray(v)) {
    if (v.length > 1) invalid(name, 'given once');
    return single({ [name]: v[0] }, name);
  }
  if (v === undefined || v === null) return undefined;
  const s = String(v).trim();
  return s === '' ? undefined : s;
}

function integer(query: Query, name: string, min: number, max: number, rule: string): number | undefined {
  const s = single(query, name);
  if (s === undefined) return undefined;
  if (!/^\d{1,9}$/.test(s)) invalid(name, rule);
  const n = Number(s);
  if (n < min || n > max) invalid(name, rule);
  return n;
}

/**
 * Validates and normalises the transform parameters; unknown parameters are ignored. Throws a 400
 * AppError naming the first bad parameter and its allowed range.
 */
export function parseImageParams(query: Query): ImageParams {
  const out: ImageParams = {};
  const dim = `an integer from 0 to ${MAX_DIMENSION}`;
  const w = integer(query, 'w', 0, MAX_DIMENSION, dim);
  if (w) out.width = w;
  const h = integer(query, 'h', 0, MAX_DIMENSION, dim);
  if (h) out.height = h;
  const q = integer(query, 'q', 1, 100, 'an integer from 1 to 100');
  if (q !== undefined) out.quality = q;

  const f = single(query, 'f')?.toLowerCase();
  if (f !== undefined) {
    const format = f === 'jpg' ? 'jpeg' : f;
    if (!(REQUESTABLE_FORMATS as readonly string[]).includes(format))
      invalid('f', `one of ${REQUESTABLE_FORMATS.join(', ')}`);
    out.format = format as RequestedFormat;
  }

  const r = single(query, 'r');
  if (r !== undefined) {
    if (r.toLowerCase() === 'full') out.radius = 'full';
    else if (/^\d{1,9}$/.test(r)) {
      const n = Number(r);
      if (n > 0) out.radius = n;
    } else invalid('r', 'an integer of 0 or more, or "full"');
  }

  const b = single(query, 'b');
  if (b !== undefined) {
    const rule = 'a number from 0.3 to 1000';
    if (!/^(\d{1,4}(\.\d{1,6})?|\.\d{1,6})$/.test(b)) invalid('b', rule);
    const n = Number(b);
    if (n < 0.3 || n > 1000) invalid('b', rule);
    out.blur = n;
  }
  return out;
}

/**
 * Media types the client names explicitly with a non-zero q. Wildcards (`image/*`, `*\/*`) do not count:
 * an old client that sends only wildcards keeps getting the source format.
 */
function acceptedTypes(accept: string | undefined): Set<string> {
  const named = new Set<string>();
  for (const part of (accept ?? '').split(',')) {
    const [type, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!type) continue;
    const qParam = params.find((p) => p.startsWith('q='));
    const weight = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (Number.isFinite(weight) && weight > 0) named.add(type);
  }
  return named;
}

/**
 * Resolves `f` against the request's Accept header. `auto` picks WebP when Accept names image/webp
 * (the spec's rule; WebP also encodes several times faster than AVIF), AVIF when it names only
 * image/avif, and otherwise the source format. `vary` says the answer depends on Accept.
 */
export function chooseFormat(
  format: RequestedFormat | undefined,
  accept: string | undefined,
): { choice: FormatChoice; vary: boolean } {
  if (format === undefined) return { choice: 'source', vary: false };
  if (format !== 'auto') return { choice: format, vary: false };
  const named = acceptedTypes(accept);
  if (named.has('image/webp')) return { choice: 'webp', vary: true };
  if (named.has('image/avif')) return { choice: 'avif', vary: true };
  return { choice: 'source', vary: true };
}

/**
 * The canonical text of a transform: equal for requests that must give the same bytes (parameter
 * order, `w=0`, `b=1.50`, unknown parameters and `f=auto` resolved to the same format all collapse).
 */
export function normalisedKey(params: ImageParams, choice: FormatChoice): string {
  return [
    `w=${params.width ?? ''}`,
    `h=${params.height ?? ''}`,
    `q=${params.quality ?? ''}`,
    `f=${choice}`,
    `r=${params.radius ?? ''}`,
    `b=${params.blur ?? ''}`,
  ].join('&');
}
