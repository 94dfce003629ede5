/**
 * Sends a folder as a zip, streamed in constant memory: entries are added as the listing goes and only a
 * few ahead of the one being written; each file is opened only when the zip reaches it.
 */
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
): Promise<FastifyReply> {
  // The first entry is fetched before answering, so a refused folder is a 403, not a broken download.
  let next = await files.next();
  const zip = new yazl.ZipFile();
  let started = 0;
  let added = 0;
  let wake: (() => void) | undefined;

  const fill = async () => {
    try {
      while (!next.done) {
        const info = next.value;
        while (added - started >= AHEAD) await new Promise<void>((r) => (wake = r));
        added++;
        zip.addReadStreamLazy(
          info.key,
          { mtime: info.lastModified, size: info.size, compress: !STORED.test(info.contentType) },
          (cb) => {
            started++;
            wake?.();
            openFile(deps, info).then(
              (s) => cb(null, s),
              (err: Error) => cb(err, undefined as never),
            );
          },
        );
        next = await files.next();
      }
      zip.end();
    } catch (err) {
      reply.log.error({ err }, 'zip aborted');
      (zip.outputStream as unknown as NodeJS.ReadableStream & { destroy(e: Error): void }).destroy(
        err as Error,
      );
    }
  };
  void fill();

  const segments = key.key.split('/').filter(Boolean);
  const name = `${segments[segments.length - 1] ?? 'files'}.zip`;
  return reply
    .code(200)
    .type('application/zip')
    .header('content-disposition', contentDisposition('attachment', name))
    .header('cache-control', 'private, no-store')
    .send(zip.outputStream);
}
