/**
 * HTTP semantics of file responses (RFC 9110): validators and conditional requests, single byte
 * ranges, and how a type is presented (inline or as a download). HBP parsed ranges loosely and had no
 * conditional GET (contract D23).
 */
import type { ObjectInfo } from './backends/object-store.ts';

export type RangeResult =
  | { kind: 'full' }
  | { kind: 'partial'; start: number; end: number }
  | { kind: 'unsatisfiable' };

/**
 * One `bytes=` range (`a-b`, `a-`, `-n`). Several ranges, other units or bad syntax are ignored (a full
 * 200, as RFC 9110 allows); a well-formed range outside the file is unsatisfiable (416).
 */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (!header) return { kind: 'full' };
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return { kind: 'full' };
  const [, a, b] = m as unknown as [string, string, string];
  if (a === '' && b === '') return { kind: 'full' };
  if (a === '') {
    const n = Number(b);
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (!Number.isSafeInteger(start) || (b !== '' && Number(b) < start)) return { kind: 'full' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', start, end };
}

function etagList(header: string): string[] {
  return header.split(',').map((t) => t.trim().replace(/^W\//, ''));
}

/** If-None-Match (weak comparison), else If-Modified-Since at one-second precision. */
export function isNotModified(
  headers: { 'if-none-match'?: string; 'if-modified-since'?: string },
  info: ObjectInfo,
): boolean {
  const inm = headers['if-none-match'];
  if (inm) {
    const tags = etagList(inm);
    return tags.includes('*') || tags.includes(info.etag.replace(/^W\//, ''));
  }
  const ims = headers['if-modified-since'];
  if (ims) {
    const since = Date.parse(ims);
    if (Number.isNaN(since)) return false;
    return Math.floor(info.lastModified.getTime() / 1000) <= Math.floor(since / 1000);
  }
  return false;
}

/** If-Range: the range applies only while the client's validator still matches (strong comparison). */
export function ifRangeMatches(header: string | undefined, info: ObjectInfo): boolean {
  if (!header) return true;
  const h = header.trim();
  if (h.startsWith('"')) return h === info.etag;
  if (h.startsWith('W/')) return false;
  const date = Date.parse(h);
  return !Number.isNaN(date) && Math.floor(info.lastModified.getTime() / 1000) <= Math.floor(date / 1000);
}

/**
 * Types a browser shows without running anything of the file's (given nosniff). Everything else,
 * HTML, SVG, XML and JavaScript among it, is sent as a download, so an uploaded page never runs on this
 * service's origin.
 */
const INLINE =
  /^(image\/(png|jpeg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon|tiff|heic|heif)|video\/[\w.+-]+|audio\/[\w.+-]+|text\/plain|text\/csv|application\/pdf|application\/json|font\/[\w.+-]+)$/;

export function isInline(contentType: string): boolean {
  return INLINE.test(contentType.split(';')[0]?.trim().toLowerCase() ?? '');
}

/**
 * Characters a name offered to a person must not carry: C0 and C1 controls and DEL, line and paragraph
 * separators, and the bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E/F,
 * U+202A–U+202E, U+2066–U+2069) with which `invoice\u202Efdp.exe` shows as `invoiceexe.pdf`.
 */
const UNSAFE_IN_NAMES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point.
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `name` without the characters that could disguise it (a download's name, a zip entry's path). */
export function displaySafeName(name: string): string {
  return name.replace(UNSAFE_IN_NAMES, '');
}

/**
 * RFC 6266 `Content-Disposition` with an ASCII fallback and the exact UTF-8 name, less the characters
 * that could disguise it (displaySafeName); a name left empty becomes `download`.
 */
export function contentDisposition(kind: 'inline' | 'attachment', name: string): string {
  const filename = displaySafeName(name) || 'download';
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const exact = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${exact}`;
}
