/**
 * Uploads: one call (`uploadFile`) takes a file as it arrives (an IncomingFile, whatever the HTTP
 * encoding), decides the content type and the rules on its first bytes, reserves its declared length
 * against the uploader's quota, streams it into the store under the size limit, and completes it
 * (files.ts completeUpload: the row, the reservation settled, the image variants of the old version
 * forgotten).
 */
import { randomUUID } from 'node:crypto';
import { open } from 'node:fs/promises';
import { pipeline, type Readable, Transform } from 'node:stream';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { ObjectInfo } from './backends/object-store.ts';
import { completeUpload, UPLOAD_LEASE_MS } from './files.ts';
import type { ParsedKey } from './keys.ts';
import { extendQuota, type QuotaReservation, releaseQuota, reserveQuota } from './quotas.ts';
import { NOT_YET_KNOWN } from './rules/expression.ts';
import type { Operation } from './rules/rules.ts';
import { type Caller, refused, ruleInput, type StorageDeps, store } from './service.ts';
import { chooseContentType, emptyFileType, SNIFF_BYTES } from './sniff.ts';

/**
 * A file as it arrives, taken out of its HTTP encoding (routes/incoming-file.ts). The stream fails with
 * an AppError when the client is at fault (a body cut short or malformed: 400), so a failure reaching
 * the upload says by its type whose fault it is.
 */
export interface IncomingFile {
  stream: Readable;
  /** The part's file name (multipart), if any. */
  filename?: string;
  /** The declared type: the part's or the request's Content-Type. */
  mimetype?: string;
  /** The body length when the client declared it (raw uploads). */
  declaredSize?: number;
  /**
   * An upper bound of the file's length when the request declares one but not the file's own (a
   * multipart body's Content-Length): what the quota reserves for it.
   */
  sizeBound?: number;
  /**
   * A local file holding exactly the bytes of `stream`, complete and fsynced (a finished resumable
   * upload on the folder backend). A store that can adopt it (fs) moves it in instead of copying the
   * stream, which is then never read.
   */
  localFile?: string;
  /** The MD5 (hex) of `localFile`, when its writer computed it on the way in. */
  localMd5?: string;
  /**
   * The quota reservation made for this file already (a resumable upload's, at its creation): used
   * instead of a new one, and left to its maker when the upload fails.
   */
  reservation?: QuotaReservation;
  /**
   * Reads what follows the file in the body and rejects (400) when it holds a second file. Awaited once
   * the file's bytes have all arrived, after the rules, before the object is committed.
   */
  checkRest?: () => Promise<void>;
}

/** The uploader a file's row and quota name: the token's user, or no one (admin secret, anonymous). */
export function uploaderOf(caller: Caller): string | null {
  if (caller.admin) return null;
  const id = caller.auth?.['user-id'];
  return typeof id === 'string' && id !== '' ? id : null;
}

function overQuota(reserved: number): AppError {
  return new AppError(
    'QUOTA_EXCEEDED',
    `The file is longer than the ${reserved} bytes reserved for it (its declared length, or what your quota had free).`,
  );
}

function tooLarge(config: Config): AppError {
  return new AppError(
    'PAYLOAD_TOO_LARGE',
    `The file is larger than the upload limit of ${config.STORAGE_MAX_UPLOAD_SIZE} bytes.`,
  );
}

/** Bytes of an upload buffered ahead of the store (one socket read's worth). */
const UPLOAD_BUFFER = 64 * 1024;

/**
 * Streams an upload into the store. The bytes flow through one guard that holds back the first
 * SNIFF_BYTES until the type and the rules are settled, counts the rest (413 past
 * STORAGE_MAX_UPLOAD_SIZE) and, at the end, settles rules that need the final size and checks for extra
 * parts; any failure errors the body, and the store then keeps nothing. Once stored, the image variants
 * of the version it replaced are forgotten.
 */
export async function uploadFile(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
  file: IncomingFile,
): Promise<ObjectInfo> {
  const { config, objects } = deps;
  if (key.folder) throw new AppError('FOLDER_UPLOAD');
  const max = config.STORAGE_MAX_UPLOAD_SIZE;
  if (file.declaredSize !== undefined && file.declaredSize > max) throw tooLarge(config);

  const existing = await store(() => objects.head(key.key));
  const name = file.filename || key.key.slice(key.key.lastIndexOf('/') + 1);
  const op: Operation = existing ? 'update' : 'create';
  let contentType = '';
  const resource = (size: number | typeof NOT_YET_KNOWN) => ({ name, size, mimetype: contentType });

  if (file.localFile && objects.adopt) {
    const info = await adoptLocalFile(deps, key, caller, file.localFile, {
      op,
      name,
      md5: file.localMd5,
      mimetype: file.mimetype,
      token: existing?.token || randomUUID(),
    });
    return completeUpload(deps, { info, ownerId: uploaderOf(caller), reservation: file.reservation });
  }

  let head!: { resolve: (first: Buffer) => void; reject: (err: Error) => void };
  const first = new Promise<Buffer>((resolve, reject) => {
    head = { resolve, reject };
  });
  // Settled once the early rules decision is made; the end-of-body checks wait for it.
  let settle!: (decideAtEnd: boolean) => void;
  const settled = new Promise<boolean>((resolve) => {
    settle = resolve;
  });
  const held: Buffer[] = [];
  let peeking = true;
  let size = 0;
  // Bytes the quota reserved (raw: Content-Length; multipart: the body's length); the stream may not pass it.
  let reserved: QuotaReservation | undefined;
  let reservedLimit = Number.POSITIVE_INFINITY;
  const release = (guard: Transform) => {
    peeking = false;
    head.resolve(Buffer.concat(held).subarray(0, SNIFF_BYTES));
    for (const c of held) guard.push(c);
    held.length = 0;
  };
  const guard = new Transform({
    highWaterMark: UPLOAD_BUFFER,
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > max) return cb(tooLarge(config));
      if (size > reservedLimit) return cb(overQuota(reservedLimit));
      if (!peeking) return cb(null, chunk);
      held.push(chunk);
      if (size >= SNIFF_BYTES) release(this);
      cb();
    },
    flush(cb) {
      if (peeking) release(this);
      settled
        .then(async (decideAtEnd) => {
          // Bytes that came in while the reservation was being made went by before its limit was known.
          if (size > reservedLimit) throw overQuota(reservedLimit);
          if (decideAtEnd) {
            const input = ruleInput(key, caller, resource(size));
            const decision = deps.rules.decide(op, input);
            if (decision.allowed !== true) throw refused(deps, op, input, caller, decision);
          }
          await file.checkRest?.();
        })
        .then(() => cb(), cb);
    },
  });
  // An error on either side ends both: a client that leaves errors the guard (and so the store's write),
  // and a refusal by the guard stops reading the client's body.
  pipeline(file.stream, guard, (err) => {
    if (err && peeking) head.reject(err);
  });

  let info: ObjectInfo;
  const ownerId = uploaderOf(caller);
  let renew: NodeJS.Timeout | undefined;
  try {
    const head = await first;
    // The head is released early only once SNIFF_BYTES have come, so an empty head is an empty body:
    // zero bytes are no image, PDF or archive, whatever was declared (an empty text is still text).
    contentType = head.length === 0 ? emptyFileType(file.mimetype) : chooseContentType(file.mimetype, head);
    let decideAtEnd = false;
    if (!caller.admin) {
      const input = ruleInput(key, caller, resource(file.declaredSize ?? NOT_YET_KNOWN));
      const early = deps.rules.decide(op, input);
      if (early.allowed === false) throw refused(deps, op, input, caller, early);
      decideAtEnd = early.allowed === 'later';
    }
    // Reserved before any byte is written (413 stores nothing); the declared length, else the size limit.
    const known = file.declaredSize ?? file.sizeBound;
    const lease = () => new Date(deps.clock.now().getTime() + UPLOAD_LEASE_MS);
    if (file.reservation) {
      // Made when the declared length was first known (a resumable upload's creation), with its own lease.
      reserved = file.reservation;
      settle(decideAtEnd);
    } else {
      reserved = await reserveQuota(deps, {
        ownerId,
        key: key.key,
        bytes: Math.min(max, known ?? max),
        expiresAt: lease(),
        // A body of unknown length (chunked) gets what is free, up to the size limit, and must stop there.
        upTo: known === undefined,
      });
      reservedLimit = reserved.length;
      // The end-of-body checks wait for this: they check the size against the reservation too.
      settle(decideAtEnd);
      const mine = reserved;
      renew = setInterval(() => void extendQuota(deps, mine, lease()).catch(() => {}), UPLOAD_LEASE_MS / 3);
      renew.unref();
    }
    const token = existing?.token || randomUUID();
    info = await store(() => objects.put(key.key, guard, { contentType, token }));
  } catch (err) {
    clearInterval(renew);
    guard.destroy();
    // Nothing was stored: the reservation goes (when even that fails, its lease runs out).
    if (reserved && reserved !== file.reservation) await releaseQuota(deps, reserved).catch(() => {});
    throw err;
  }
  clearInterval(renew);
  return completeUpload(deps, { info, ownerId, reservation: reserved });
}

/**
 * uploadFile for a complete local file the store can adopt: the same content type (sniffed from its first
 * bytes) and the same rules (on its real size and type), then the file moved in instead of copied.
 */
async function adoptLocalFile(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
  localFile: string,
  at: { op: Operation; name: string; md5: string | undefined; mimetype: string | undefined; token: string },
): Promise<ObjectInfo> {
  const { config, objects } = deps;
  const fh = await open(localFile, 'r');
  let size: number;
  let head: Buffer;
  try {
    size = (await fh.stat()).size;
    head = Buffer.alloc(Math.min(SNIFF_BYTES, size));
    await fh.read(head, 0, head.length, 0);
  } finally {
    await fh.close();
  }
  if (size > config.STORAGE_MAX_UPLOAD_SIZE) throw tooLarge(config);
  const contentType = size === 0 ? emptyFileType(at.mimetype) : chooseContentType(at.mimetype, head);
  if (!caller.admin) {
    const input = ruleInput(key, caller, { name: at.name, size, mimetype: contentType });
    const decision = deps.rules.decide(at.op, input);
    if (decision.allowed !== true) throw refused(deps, at.op, input, caller, decision);
  }
  const adopt = objects.adopt?.bind(objects);
  if (!adopt) throw new Error('the store cannot adopt files');
  return store(() => adopt(key.key, localFile, { contentType, token: at.token }, at.md5));
}
