/**
 * Sends a folder as a zip, streamed in bounded memory: entries are added as the listing goes and only a
 * few ahead of the one being written. Small files are read whole a few entries ahead of their turn, so
 * the zip does not wait on one store round trip after another (that wait, not the compression, was most
 * of a 1,000-file zip: docs/performance.md); larger files are opened when the zip reaches them. Every
 * file is opened as the version the listing described (the rules were checked on that metadata); one
 * that changed since makes the zip fail rather than hold bytes its entry does not describe.
 */
import { PassThrough, pipeline, type Readable, Transform } from 'node:stream';
import type { FastifyReply } from 'fastify';
import yazl from 'yazl';
import type { ObjectInfo } from '../backends/object-store.ts';
import { contentDisposition } from '../http-file.ts';
import type { ParsedKey } from '../keys.ts';
import { openFile, type StorageDeps } from '../service.ts';

/** Entries queued ahead of the one being written. */
const AHEAD = 16;
/** Files up to this size are read whole ahead of their turn... */
const READ_AHEAD_MAX = 256 * 1024;
/** ...as long as no more than this is held in memory. */
const READ_AHEAD_BYTES = 4 * 1024 * 1024;
/** The zip goes out in pieces of this size (yazl writes three small pieces per entry)... */
const SEND_CHUNK = 64 * 1024;
/** ...or whatever has gathered after this long. */
const SEND_DELAY_MS = 10;
const STORED =
  /^(image\/(?!svg|bmp|tiff)|video\/|audio\/|application\/(zip|gzip|x-7z-compressed|vnd\.rar|pdf)|font\/woff)/;

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
  let started = 0;
  let added = 0;
  let wake: (() => void) | undefined;
  let current: Readable | undefined;
  let gone = false;
  const abort = (err: Error) => {
    if (gone) return;
    gone = true;
    current?.destroy();
    wake?.();
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
    wake?.();
  });

  /** The bytes of a small file, read before the zip reaches it. */
  const readAhead = async (info: ObjectInfo): Promise<Buffer> => {
    const chunks: Buffer[] = [];
    for await (const c of await openFile(deps, info)) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };
  let held = 0;

  const fill = async () => {
    try {
      while (!next.done) {
        const info = next.value;
        const early = info.size <= READ_AHEAD_MAX;
        while (
          !gone &&
          (added - started >= AHEAD || (early && held > 0 && held + info.size > READ_AHEAD_BYTES))
        )
          await new Promise<void>((r) => (wake = r));
        if (gone) {
          await files.return?.();
          return;
        }
        added++;
        let bytes: Promise<Buffer> | undefined;
        if (early) {
          held += info.size;
          bytes = readAhead(info);
          // Handled when the zip reaches the entry; this only keeps an early failure from being unhandled.
          bytes.catch(() => {});
        }
        zip.addReadStreamLazy(
          info.key,
          { mtime: info.lastModified, size: info.size, compress: !STORED.test(info.contentType) },
          (cb) => {
            started++;
            wake?.();
            const opening = bytes
              ? bytes.then((b) => {
                  held -= info.size;
                  wake?.();
                  const s = new PassThrough();
                  s.end(b);
                  return s as Readable;
                })
              : openFile(deps, info);
            opening.then(
              (s) => {
                current = s;
                if (gone) s.destroy();
                cb(null, s);
              },
              (err: Error) => cb(err, undefined as never),
            );
          },
        );
        next = await files.next();
      }
      zip.end();
    } catch (err) {
      reply.log.error({ err }, 'zip aborted');
      abort(err as Error);
    }
  };
  void fill();
  // One socket write (and one HTTP chunk) per SEND_CHUNK instead of three per entry: with 1,000 small
  // files, those writes were a fifth of the zip's time (docs/performance.md).
  const out = coalesce();
  pipeline(zip.outputStream as unknown as Readable, out, () => {});
  return reply.send(out);
}

/** Passes bytes on in pieces of at least SEND_CHUNK, or what gathered within SEND_DELAY_MS. */
function coalesce(): Transform {
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
