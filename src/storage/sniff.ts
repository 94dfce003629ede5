/**
 * Content type from the first bytes of a file, for uploads whose declared type is missing or generic
 * (`file-type` needs Node 22). It recognises the formats people upload most, and the markup a browser
 * would run (HTML, SVG, XML), so those are never stored under a harmless-looking generic type.
 */

/** Bytes the sniffer looks at. */
export const SNIFF_BYTES = 4100;

const GENERIC = new Set([
  '',
  'application/octet-stream',
  'binary/octet-stream',
  'application/unknown',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
]);

const MEDIA_TYPE =
  /^[A-Za-z0-9][\w.+!#$&^-]*\/[A-Za-z0-9][\w.+!#$&^-]*(\s*;\s*[\w.+-]+=("[^"\r\n]*"|[\w.+-]+))*$/;

function startsWith(buf: Buffer, bytes: readonly number[], offset = 0): boolean {
  if (buf.length < offset + bytes.length) return false;
  return bytes.every((b, i) => buf[offset + i] === b);
}

function ascii(buf: Buffer, offset: number, text: string): boolean {
  return buf.toString('latin1', offset, offset + text.length) === text;
}

const FTYP: Record<string, string> = {
  avif: 'image/avif',
  avis: 'image/avif',
  heic: 'image/heic',
  heix: 'image/heic',
  mif1: 'image/heif',
  msf1: 'image/heif',
  qt: 'video/quicktime',
  M4A: 'audio/mp4',
  M4V: 'video/mp4',
  '3gp4': 'video/3gpp',
  '3gp5': 'video/3gpp',
};

/** The type the bytes show, or undefined when they show nothing recognisable. */
export function sniff(buf: Buffer): string | undefined {
  if (startsWith(buf, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (startsWith(buf, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (ascii(buf, 0, 'GIF87a') || ascii(buf, 0, 'GIF89a')) return 'image/gif';
  if (ascii(buf, 0, 'RIFF') && ascii(buf, 8, 'WEBP')) return 'image/webp';
  if (ascii(buf, 0, 'RIFF') && ascii(buf, 8, 'WAVE')) return 'audio/wav';
  if (ascii(buf, 0, 'RIFF') && ascii(buf, 8, 'AVI ')) return 'video/x-msvideo';
  if (ascii(buf, 4, 'ftyp')) {
    const brand = buf.toString('latin1', 8, 12).replace(/\0|\s+$/g, '');
    return FTYP[brand] ?? 'video/mp4';
  }
  if (ascii(buf, 0, '%PDF-')) return 'application/pdf';
  if (startsWith(buf, [0x50, 0x4b, 0x03, 0x04]) || startsWith(buf, [0x50, 0x4b, 0x05, 0x06]))
    return 'application/zip';
  if (startsWith(buf, [0x1f, 0x8b])) return 'application/gzip';
  if (startsWith(buf, [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c])) return 'application/x-7z-compressed';
  if (ascii(buf, 0, 'Rar!')) return 'application/vnd.rar';
  if (ascii(buf, 0, 'BM') && buf.length > 14) return 'image/bmp';
  if (startsWith(buf, [0x49, 0x49, 0x2a, 0x00]) || startsWith(buf, [0x4d, 0x4d, 0x00, 0x2a]))
    return 'image/tiff';
  if (startsWith(buf, [0x00, 0x00, 0x01, 0x00])) return 'image/x-icon';
  if (startsWith(buf, [0x1a, 0x45, 0xdf, 0xa3])) return 'video/webm';
  if (ascii(buf, 0, 'OggS')) return 'audio/ogg';
  if (ascii(buf, 0, 'fLaC')) return 'audio/flac';
  if (ascii(buf, 0, 'ID3') || startsWith(buf, [0xff, 0xfb])) return 'audio/mpeg';
  if (startsWith(buf, [0x00, 0x61, 0x73, 0x6d])) return 'application/wasm';
  if (ascii(buf, 0, 'wOFF')) return 'font/woff';
  if (ascii(buf, 0, 'wOF2')) return 'font/woff2';
  return sniffText(buf);
}

function sniffText(buf: Buffer): string | undefined {
  if (buf.length === 0) return undefined;
  if (buf.includes(0)) return undefined;
  let text = buf.toString('utf8');
  if (text.includes('\ufffd') && !isTruncatedUtf8(buf)) return undefined;
  text = text.replace(/^\ufeff/, '').trimStart();
  const lower = text.slice(0, 1024).toLowerCase();
  if (
    /^<!doctype html|^<(html|head|body|script|iframe|title|style|meta|div|a|p|img|svg:svg)[\s>/]/.test(lower)
  )
    return 'text/html';
  if (/^<svg[\s>]/.test(lower) || (lower.startsWith('<?xml') && lower.includes('<svg')))
    return 'image/svg+xml';
  if (lower.startsWith('<?xml')) return 'application/xml';
  if (/^[[{]/.test(lower)) {
    try {
      JSON.parse(text);
      return 'application/json';
    } catch {
      // A prefix of a larger JSON document, or not JSON: plain text either way.
    }
  }
  return 'text/plain';
}

/** True when the only invalid UTF-8 is a character cut at the end of the sniffed window. */
function isTruncatedUtf8(buf: Buffer): boolean {
  const head = buf.subarray(0, Math.max(0, buf.length - 4)).toString('utf8');
  return !head.includes('\ufffd');
}

/**
 * The type to store: the client's claim when it is a specific, well-formed media type, else what the
 * bytes show, else `application/octet-stream`.
 */
export function chooseContentType(declared: string | undefined, head: Buffer): string {
  const claim = (declared ?? '').trim();
  const essence = claim.split(';')[0]?.trim().toLowerCase() ?? '';
  if (!GENERIC.has(essence) && MEDIA_TYPE.test(claim)) return claim;
  return sniff(head) ?? 'application/octet-stream';
}

/**
 * The type of a 0-byte file: its declared type when that is text (an empty text file is still one),
 * else `application/octet-stream`, since no image, document or archive format is zero bytes long.
 */
export function emptyFileType(declared: string | undefined): string {
  const claim = (declared ?? '').trim();
  return /^text\/[\w.+-]+\s*(;.*)?$/i.test(claim) ? claim : 'application/octet-stream';
}
