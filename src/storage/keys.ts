/**
 * Object keys from request paths. HBP used the raw, still percent-encoded path as the key and matched
 * rules case-insensitively (contract D22); Gatehouse percent-decodes once, keeps case, and refuses
 * anything that could mean a different place than it says: `.`/`..` and empty segments, backslashes,
 * NUL and other control characters, malformed escapes. Rules then see exactly the key that is stored.
 */
import { AppError } from '../errors.ts';

/**
 * The first path segment reserved for the parts of resumable uploads still in progress (src/storage/tus/):
 * on S3 they live in the bucket under this prefix. No request may name it, and listings skip it, so an
 * incomplete upload is never listed, zipped, served, overwritten or deleted through /storage/o.
 */
export const UPLOADS_SEGMENT = '.gatehouse-uploads';
export const UPLOADS_PREFIX = `${UPLOADS_SEGMENT}/`;

/** Whether a stored key belongs to the uploads in progress (never a file). */
export function isReservedKey(key: string): boolean {
  return key === UPLOADS_SEGMENT || key.startsWith(UPLOADS_PREFIX);
}

/** S3's limit on a key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 1024;

export interface ParsedKey {
  /** The decoded key; a folder key ends with `/` (the root folder is the empty string). */
  key: string;
  folder: boolean;
  /** `/` + key, as the rules see it. */
  path: string;
}

// C0 controls, DEL and C1 controls.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function invalid(reason: string): AppError {
  return new AppError('INVALID_KEY', `The file path is not valid: ${reason}.`);
}

/** Decodes and checks the part of the URL path after `/storage/o/` or `/storage/m/`. */
export function parseKey(rawPath: string): ParsedKey {
  let key: string;
  try {
    key = decodeURIComponent(rawPath);
  } catch {
    throw invalid('it has a malformed percent-escape or is not UTF-8');
  }
  return checkedKey(key);
}

/** Checks a key given already decoded (a path in a JSON body), as parseKey checks a decoded URL path. */
export function checkedKey(key: string): ParsedKey {
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw invalid(`it is longer than ${MAX_KEY_BYTES} bytes`);
  if (CONTROL.test(key)) throw invalid('it contains a control character');
  if (key.includes('\\')) throw invalid('it contains a backslash');
  const folder = key === '' || key.endsWith('/');
  const body = folder ? key.slice(0, -1) : key;
  if (key !== '') {
    for (const segment of body.split('/')) {
      if (segment === '') throw invalid('it has an empty segment');
      if (segment === '.' || segment === '..') throw invalid(`it has a "${segment}" segment`);
    }
    if (isReservedKey(key)) throw invalid(`"${UPLOADS_SEGMENT}" is reserved for uploads in progress`);
  }
  return { key, folder, path: `/${key}` };
}
