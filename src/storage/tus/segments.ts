/**
 * Where the bytes of resumable uploads wait until they are complete: segments, each named by the offset
 * it starts at, written durably before the upload's offset (storage.uploads) moves past them. S3 keeps
 * each segment as an object under the reserved prefix of the bucket (segments-s3.ts), so any instance can
 * resume an upload another began. The folder backend keeps one file per upload in `DATA_DIR/uploads/`,
 * outside the served objects, written in place at each segment's offset: complete, it is moved into the
 * store as the object (FsObjectStore.adopt) without its bytes being copied again.
 *
 * Only the committed offset says which bytes count: a segment cut off by a kill is never read, and is
 * overwritten when the client resumes from the last committed offset.
 */
import { constants } from 'node:fs';
import { mkdir, open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { DIR_MODE, FILE_MODE } from '../../data-dir.ts';

export interface SegmentArea {
  /** Stores `data` as the bytes of upload `id` from offset `start`; durable once resolved. */
  put(id: string, start: number, data: Buffer): Promise<void>;
  /** Start offset → size of every segment the upload has. */
  list(id: string): Promise<Map<number, number>>;
  /** `length` bytes of the segment starting at `start`. */
  open(id: string, start: number, length: number): Promise<Readable>;
  /** Removes every segment of the upload (nothing to remove is not an error). */
  remove(id: string): Promise<void>;
  /** The one local file holding the whole upload, when the area keeps it so (fs). */
  localFile?(id: string): string;
  /**
   * fs: `put` in two steps, so that a PATCH can be answered once its bytes are written and made durable
   * while the next one arrives: `write` leaves them in the page cache, `sync` flushes all written so far.
   */
  write?(id: string, start: number, data: Buffer): Promise<void>;
  sync?(id: string): Promise<void>;
}

/** Upload ids are ours (random hex); anything else never reaches a path or a key. */
export function checkUploadId(id: string): string {
  if (!/^[0-9a-f]{32}$/.test(id)) throw new Error(`not an upload id: ${JSON.stringify(id)}`);
  return id;
}

export function segmentName(start: number): string {
  return String(start).padStart(16, '0');
}

export class FsSegments implements SegmentArea {
  constructor(private readonly root: string) {}

  async init(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: DIR_MODE });
  }

  localFile(id: string): string {
    return path.join(this.root, `${checkUploadId(id)}.part`);
  }

  async put(id: string, start: number, data: Buffer): Promise<void> {
    await this.write(id, start, data);
    await this.sync(id);
  }

  async write(id: string, start: number, data: Buffer): Promise<void> {
    // Read-write, created when missing, never appending: each write goes at its own position.
    const fh = await open(this.localFile(id), constants.O_RDWR | constants.O_CREAT, FILE_MODE);
    try {
      let at = 0;
      while (at < data.length) {
        const { bytesWritten } = await fh.write(data, at, data.length - at, start + at);
        at += bytesWritten;
      }
    } finally {
      await fh.close();
    }
  }

  async sync(id: string): Promise<void> {
    const fh = await open(this.localFile(id), 'r+');
    try {
      await fh.datasync();
    } finally {
      await fh.close();
    }
  }

  async list(id: string): Promise<Map<number, number>> {
    try {
      const s = await stat(this.localFile(id));
      return new Map([[0, s.size]]);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw err;
    }
  }

  async open(id: string, start: number, length: number): Promise<Readable> {
    const fh = await open(this.localFile(id), 'r');
    return fh.createReadStream({ start, end: start + length - 1, highWaterMark: 1024 * 1024 });
  }

  async remove(id: string): Promise<void> {
    await rm(this.localFile(id), { force: true });
  }
}
