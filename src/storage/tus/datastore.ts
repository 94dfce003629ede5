/**
 * The @tus/server data store of Gatehouse: upload state in storage.uploads (uploads-store.ts), bytes in
 * segments (segments.ts). @tus/server speaks the protocol (headers, offsets, locks, expiration answers);
 * this store decides what is durable: a PATCH's bytes are cut into segments of SEGMENT_BYTES, each written
 * durably and then committed by moving the offset forward in the database, so a PATCH cut off or a
 * process killed resumes from the last committed segment. A PATCH that carries `Upload-Checksum` commits
 * only at its end, once the route has checked the digest: a body that fails the check commits nothing.
 */
import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { DataStore, ERRORS, Upload } from '@tus/utils';
import type { Database } from '../../db/database.ts';
import type { SegmentArea } from './segments.ts';
import { advanceOffset, findUpload, type UploadRow } from './uploads-store.ts';

/** Bytes per segment: what one PATCH holds in memory at most before it is written and committed. */
export const SEGMENT_BYTES = 8 * 1024 * 1024;

export interface SegmentStoreDeps {
  db: Database;
  segments: SegmentArea;
  expiryMs: number;
  /** Whether a PATCH of this upload now in progress carries a checksum (commit only at its end). */
  atomic(id: string): boolean;
  /** Termination (DELETE): removes the upload and what it holds. */
  terminate(id: string): Promise<void>;
  /** Running MD5s of uploads whose every byte this process wrote in order (see `md5Of`). */
  digests: Map<string, { offset: number; hash: Hash }>;
}

export function toUpload(row: UploadRow): Upload {
  return new Upload({
    id: row.id,
    size: row.length,
    offset: row.completedAt ? row.length : row.offset,
    metadata: row.metadata,
    creation_date: row.createdAt.toISOString(),
  });
}

export class SegmentStore extends DataStore {
  constructor(private readonly deps: SegmentStoreDeps) {
    super();
    this.extensions = ['creation', 'creation-with-upload', 'termination', 'expiration', 'checksum'];
  }

  /** The route inserted the row (owner, target) before handing the request over: it only has to exist. */
  override async create(upload: Upload): Promise<Upload> {
    const row = await findUpload(this.deps.db, upload.id);
    if (!row) throw ERRORS.FILE_NOT_FOUND;
    upload.creation_date = row.createdAt.toISOString();
    return upload;
  }

  override async getUpload(id: string): Promise<Upload> {
    const row = await findUpload(this.deps.db, id);
    if (!row) throw ERRORS.FILE_NOT_FOUND;
    return toUpload(row);
  }

  override async remove(id: string): Promise<void> {
    await this.deps.terminate(id);
  }

  override getExpiration(): number {
    return this.deps.expiryMs;
  }

  override async write(stream: Readable, id: string, offset: number): Promise<number> {
    const { db, segments } = this.deps;
    const atomic = this.deps.atomic(id);
    let committed = offset;
    let written = offset;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const commit = async () => {
      if (written === committed) return;
      if (!(await advanceOffset(db, id, committed, written))) throw ERRORS.INVALID_OFFSET;
      committed = written;
    };
    // The file's MD5 (its ETag) follows the bytes when they come in order from the start; any gap (a
    // restart, another instance, a failed commit) drops it, and completion reads the file back instead.
    const digests = this.deps.digests;
    let digest = digests.get(id);
    if (offset === 0) digest = { offset: 0, hash: createHash('md5') };
    if (digest?.offset !== offset) digest = undefined;
    digests.delete(id);
    const flush = async (n: number) => {
      const all = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
      const data = all.subarray(0, n);
      const rest = all.subarray(n);
      pending = rest.length > 0 ? [rest] : [];
      pendingBytes = rest.length;
      await segments.put(id, written, data);
      digest?.hash.update(data);
      written += data.length;
      if (!atomic) await commit();
    };
    try {
      for await (const chunk of stream) {
        const b = chunk as Buffer;
        if (b.length === 0) continue;
        pending.push(b);
        pendingBytes += b.length;
        while (pendingBytes >= SEGMENT_BYTES) await flush(SEGMENT_BYTES);
      }
      if (pendingBytes > 0) await flush(pendingBytes);
      await commit();
    } catch (err) {
      // Some bytes may be hashed and not committed: the running MD5 no longer matches the offset.
      digest = undefined;
      throw err;
    } finally {
      if (digest && written === committed) digests.set(id, { offset: committed, hash: digest.hash });
    }
    return committed;
  }

  /** The MD5 (hex) of a complete upload, when this process saw all of its bytes in order. */
  md5Of(id: string, length: number): string | undefined {
    const d = this.deps.digests.get(id);
    this.deps.digests.delete(id);
    return d && d.offset === length ? d.hash.digest('hex') : undefined;
  }
}
