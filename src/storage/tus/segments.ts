/**
 * Where the bytes of resumable uploads wait until they are complete: segments, each named by the offset
 * it starts at, written whole and durably before the upload's offset (storage.uploads) moves past them.
 * The folder backend keeps them in `DATA_DIR/uploads/<id>/`, outside the served objects; S3 keeps them in
 * the bucket under the reserved prefix (keys.ts), so any instance can resume an upload another began.
 *
 * A segment is read only up to where the next one starts: a segment rewritten after a kill (the client
 * resumed from the last committed offset) replaces the one of the same name, and one that was never
 * committed is never on the chain that the committed offsets describe.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { DIR_MODE, FILE_MODE } from '../../data-dir.ts';

export interface SegmentArea {
  /** Stores `data` as the segment of upload `id` starting at `start`; durable once resolved. */
  put(id: string, start: number, data: Buffer): Promise<void>;
  /** Start offset → size of every segment the upload has. */
  list(id: string): Promise<Map<number, number>>;
  /** The first `length` bytes of the segment starting at `start`. */
  open(id: string, start: number, length: number): Promise<Readable>;
  /** Removes every segment of the upload (nothing to remove is not an error). */
  remove(id: string): Promise<void>;
}

/** Upload ids are ours (random hex); anything else never reaches a path. */
const ID = /^[0-9a-f]{32}$/;

export function segmentName(start: number): string {
  return String(start).padStart(16, '0');
}

function checkId(id: string): string {
  if (!ID.test(id)) throw new Error(`not an upload id: ${JSON.stringify(id)}`);
  return id;
}

export class FsSegments implements SegmentArea {
  private readonly tmp: string;

  constructor(private readonly root: string) {
    this.tmp = path.join(root, '.tmp');
  }

  async init(): Promise<void> {
    await mkdir(this.tmp, { recursive: true, mode: DIR_MODE });
    // What a killed process was writing: never committed, never read.
    for (const name of await readdir(this.tmp)) await rm(path.join(this.tmp, name), { force: true });
  }

  async put(id: string, start: number, data: Buffer): Promise<void> {
    const dir = path.join(this.root, checkId(id));
    await mkdir(dir, { recursive: true, mode: DIR_MODE });
    const tmpFile = path.join(this.tmp, randomUUID());
    try {
      const fh = await open(tmpFile, 'wx', FILE_MODE);
      try {
        await fh.writeFile(data);
        await fh.datasync();
      } finally {
        await fh.close();
      }
      await rename(tmpFile, path.join(dir, segmentName(start)));
    } finally {
      await rm(tmpFile, { force: true });
    }
  }

  async list(id: string): Promise<Map<number, number>> {
    const dir = path.join(this.root, checkId(id));
    const out = new Map<number, number>();
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return out;
      throw err;
    }
    for (const name of names) {
      if (!/^\d{16}$/.test(name)) continue;
      const s = await stat(path.join(dir, name));
      out.set(Number(name), s.size);
    }
    return out;
  }

  async open(id: string, start: number, length: number): Promise<Readable> {
    const fh = await open(path.join(this.root, checkId(id), segmentName(start)), 'r');
    return fh.createReadStream({ start: 0, end: length - 1, highWaterMark: 1024 * 1024 });
  }

  async remove(id: string): Promise<void> {
    await rm(path.join(this.root, checkId(id)), { recursive: true, force: true });
  }
}
