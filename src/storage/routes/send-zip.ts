/**
 * Sends a folder as a zip, streamed in bounded memory: entries are added as the listing goes and only a
 * few ahead of the one being written. Small files are read whole a few entries ahead of their turn and
 * handed to the zip as buffers, so the zip neither waits on one store round trip after another nor
 * builds a chain of streams per entry (those, not the compression, were most of a 1,000-file zip:
 * docs/performance.md); larger files are opened when the zip reaches them. Every file is read as the
 * version the listing described (the rules were checked on that metadata); one that changed since makes
 * the zip fail rather than hold bytes its entry does not describe.
 */
import { pipeline, type Readable, Transform } from 'node:stream';
import type { FastifyReply } from 'fastify';
import yazl from 'yazl';
import type { ObjectInfo } from '../backends/object-store.ts';
import { contentDisposition, displaySafeName } from '../http-file.ts';
import type { ParsedKey } from '../keys.ts';
import { fileGone, openFile, readFileBytes, type StorageDeps } from '../service.ts';

/** Entries the zip holds unwritten, and files read ahead of those. */
const AHEAD = 16;
/** Zip output waiting to be taken by the connection before no more entries are added. */
const OUTPUT_AHEAD = 256 * 1024;
/** Files up to this size are read whole ahead of their turn; larger ones stream when it comes. */
const READ_AHEAD_MAX = 128 * 1024;
/** The zip goes out in pieces of this size (yazl writes a few small pieces per entry)... */
const SEND_CHUNK = 64 * 1024;
/** ...or whatever has gathered after this long. */
const SEND_DELAY_MS = 10;
const STORED =
  /^(image\/(?!svg|bmp|tiff)|video\/|audio\/|application\/(zip|gzip|x-7z-compressed|vnd\.rar|pdf)|font\/woff)/;

/**
 * How many of the zip's entries yazl has written out. yazl has no event for it; its entries carry a
 * state that reaches FILE_DATA_DONE (3) once written (yazl 3). Checked here, and by a test, so that an
 * upgrade that changes it fails loudly instead of leaving the read-ahead unbounded.
 */
export function writtenEntries(zip: yazl.ZipFile, from: number): number {
  const entries = (zip as unknown as { entries?: { state?: unknown }[] }).entries;
  if (!Array.isArray(entries)) throw new Error('yazl no longer exposes its entries; see writtenEntries');
  let n = from;
  while (n < entries.length) {
    const state = entries[n]?.state;
    if (typeof state !== 'number') throw new Error('yazl entries have no state; see writtenEntries');
    if (state < 3) break;
    n++;
  }
  return n;
}

/**
 * The entry's path for `key`: its full key, each segment without the characters that could disguise a
 * name (an unzipped `report\u202Eexe.pdf` would show as `reportfdp.exe`); a segment that is left empty,
 * `.` or `..` becomes `_`, so that no entry escapes the folder it is unzipped into.
 */
export function entryName(key: string): string {
  return key
    .split('/')
    .map((segment) => {
      const safe = displaySafeName(segment);
      return safe === '' || safe === '.' || safe === '..' ? '_' : safe;
    })
    .join('/');
}

export async function sendZip(
  deps: StorageDeps,
  reply: FastifyReply,
  key: ParsedKey,
  files: AsyncIterator<ObjectInfo>,
  opts: { head?: boolean } = {},
): Promise<FastifyReply> {
  // The first entry is fetched before answering, so a refused folder is a 403, not a broken download.
  let next = await files.next();
  const segments = key.key.split('/').filter(Boolean);
  const name = `${segments[segments.length - 1] ?? 'files'}.zip`;
  reply
    .code(200)
    .type('application/zip')
    .header('content-disposition', contentDisposition('attachment', name))
    .header('cache-control', 'private, no-store');
  if (opts.head) {
    await files.return?.();
    return reply.send();
  }
  const zip = new yazl.ZipFile();
  let added = 0;
  let written = 0;
  let wake: (() => void) | undefined;
  const nudge = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let current: Readable | undefined;
  let gone = false;
  const abort = (err: Error) => {
    if (gone) return;
    gone = true;
    current?.destroy();
    nudge();
    (zip.outputStream as unknown as NodeJS.ReadableStream & { destroy(e: Error): void }).destroy(err);
  };
  // A file deleted or rewritten while the zip is being written, or a store read that fails, surfaces as
  // an 'error' on the zip; unhandled, it would take the whole process down. The download is cut short
  // (the client sees a truncated zip), and the service carries on.
  zip.on('error', (err: Error) => {
    reply.log.warn({ err }, 'zip aborted: a file changed or could not be read while zipping');
    abort(err);
  });
  // A client that leaves mid-download: stop listing and release the file being read (an S3 socket).
  reply.raw.once('close', () => {
    if (reply.raw.writableFinished) return;
    gone = true;
    current?.destroy();
    nudge();
  });

  const output = zip.outputStream as unknown as Readable & { writableLength: number };
  const unsent = () => output.readableLength + output.writableLength;
  /** Listed files not yet added to the zip; small ones already being read. */
  const ahead: { info: ObjectInfo; bytes?: Promise<Buffer> }[] = [];
  const fill = async () => {
    try {
      for (;;) {
        while (!next.done && ahead.length < AHEAD && !gone) {
          const info = next.value;
          const bytes = info.size <= READ_AHEAD_MAX ? readFileBytes(deps, info) : undefined;
          // Handled when the entry's turn comes; this only keeps an early failure from being unhandled.
          bytes?.catch(() => {});
          ahead.push({ info, bytes });
          next = await files.next();
        }
        // yazl writes a buffer's entry out whole, whatever its output stream's backpressure: wait both for
        // it to catch up and for what it wrote to be taken.
        for (;;) {
          written = writtenEntries(zip, written);
          if (gone || (added - written < AHEAD && unsent() < OUTPUT_AHEAD)) break;
          await new Promise<void>((r) => (wake = r));
        }
        const entry = ahead.shift();
        if (gone || !entry) break;
        const { info, bytes } = entry;
        const options = { mtime: info.lastModified, compress: !STORED.test(info.contentType) };
        if (bytes) {
          let buf: Buffer;
          try {
            buf = await bytes;
          } catch (err) {
            // A file gone since it was listed (deleted meanwhile, or a row whose object a crash or another
            // tool removed) is left out: it has no bytes its entry could misdescribe. Any other failure,
            // or a file that changed, still ends the zip.
            if ((await fileGone(deps, info.key)) && !gone) continue;
            throw err;
          }
          zip.addBuffer(buf, entryName(info.key), options);
        } else {
          zip.addReadStreamLazy(entryName(info.key), { ...options, size: info.size }, (cb) => {
            openFile(deps, info).then(
              (s) => {
                current = s;
                if (gone) s.destroy();
                cb(null, s);
              },
              (err: Error) => cb(err, undefined as never),
            );
          });
        }
        added++;
      }
      if (gone) await files.return?.();
      else zip.end();
    } catch (err) {
      reply.log.error({ err }, 'zip aborted');
      abort(err as Error);
    }
  };
  void fill();
  // One socket write (and one HTTP chunk) per SEND_CHUNK instead of a few per entry: with 1,000 small
  // files, those writes were a fifth of the zip's time (docs/performance.md). Each piece yazl writes
  // also wakes the loop above, which waits for yazl to catch up.
  const out = coalesce(nudge);
  pipeline(zip.outputStream as unknown as Readable, out, () => {});
  return reply.send(out);
}

/** Passes bytes on in pieces of at least SEND_CHUNK, or what gathered within SEND_DELAY_MS. */
function coalesce(onData: () => void): Transform {
  let parts: Buffer[] = [];
  let length = 0;
  let timer: NodeJS.Timeout | undefined;
  const emit = () => {
    clearTimeout(timer);
    timer = undefined;
    if (length === 0) return;
    out.push(parts.length === 1 ? parts[0] : Buffer.concat(parts, length));
    parts = [];
    length = 0;
  };
  const out = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      onData();
      parts.push(chunk);
      length += chunk.length;
      if (length >= SEND_CHUNK) emit();
      else timer ??= setTimeout(emit, SEND_DELAY_MS);
      cb();
    },
    flush(cb) {
      emit();
      cb();
    },
    destroy(err, cb) {
      clearTimeout(timer);
      cb(err);
    },
  });
  return out;
}
