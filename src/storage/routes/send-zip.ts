/**
 * Sends a folder as a zip, streamed in constant memory: entries are added as the listing goes and only a
 * few ahead of the one being written; each file is opened only when the zip reaches it.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import yazl from 'yazl';
import type { ObjectInfo } from '../backends/object-store.ts';
import { contentDisposition } from '../http-file.ts';
import type { ParsedKey } from '../keys.ts';
import { openFile, type StorageDeps } from '../service.ts';

/** Entries queued ahead of the one being written. */
const AHEAD = 8;
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

  const fill = async () => {
    try {
      while (!next.done) {
        const info = next.value;
        while (added - started >= AHEAD && !gone) await new Promise<void>((r) => (wake = r));
        if (gone) {
          await files.return?.();
          return;
        }
        added++;
        zip.addReadStreamLazy(
          info.key,
          { mtime: info.lastModified, size: info.size, compress: !STORED.test(info.contentType) },
          (cb) => {
            started++;
            wake?.();
            openFile(deps, info).then(
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
  return reply.send(zip.outputStream);
}
