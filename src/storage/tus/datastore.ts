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
/** Bytes per write into an upload's local file (fs). */
const WRITE_BYTES = 1024 * 1024;

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

/**
 * An upload on an area with `write`/`sync` (fs) whose accepted bytes are not all committed yet: each
 * PATCH is answered once its bytes are written, and a chain flushes them and moves the committed offset
 * while the next PATCH arrives. A kill before the chain ran leaves the committed offset behind: after a
 * restart HEAD answers it, and the client sends those bytes again (TUS clients always ask after a
 * failure). The last PATCH, and one with a checksum, wait for their commit.
 */
interface Unsynced {
  /** The upload's row as read when the first PATCH of this process began (owner, target, length). */
  row: UploadRow;
  /** The offset after the last accepted byte. */
  written: number;
  /** The offset in the database. */
  durable: number;
  chain: Promise<void>;
  failed: boolean;
}

export class SegmentStore extends DataStore {
  private readonly unsynced = new Map<string, Unsynced>();

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
    // An upload this process is writing: its accepted bytes count (their commit is on its way), and the
    // database is not asked again for what it already said.
    const u = this.unsynced.get(id);
    if (u?.failed) this.unsynced.delete(id);
    else if (u) return toUpload({ ...u.row, offset: u.written });
    const row = await findUpload(this.deps.db, id);
    if (!row) throw ERRORS.FILE_NOT_FOUND;
    return toUpload(row);
  }

  override async remove(id: string): Promise<void> {
    this.unsynced.delete(id);
    await this.deps.terminate(id);
  }

  /** The row of an upload this process is writing (immutable fields; the offset is its own). */
  cachedRow(id: string): UploadRow | undefined {
    const u = this.unsynced.get(id);
    return u && !u.failed ? u.row : undefined;
  }

  /** Forgets what this process knows of an upload that is gone (terminated, expired, completed). */
  forget(id: string): void {
    this.unsynced.delete(id);
    this.deps.digests.delete(id);
  }

  override getExpiration(): number {
    return this.deps.expiryMs;
  }

  override async write(stream: Readable, id: string, offset: number): Promise<number> {
    const { segments } = this.deps;
    if (segments.write && segments.sync) return this.writeDeferred(stream, id, offset);
    return this.writeCommitted(stream, id, offset);
  }

  /** Queues a flush and the commit of everything up to `target` behind the upload's earlier ones. */
  private commitLater(id: string, u: Unsynced, target: number): void {
    const { db, segments } = this.deps;
    u.chain = u.chain.then(async () => {
      if (u.failed || target <= u.durable) return;
      try {
        await segments.sync?.(id);
        if (!(await advanceOffset(db, id, u.durable, target))) throw ERRORS.INVALID_OFFSET;
        u.durable = target;
      } catch {
        // Nothing more commits; the next request learns the committed offset (getUpload) and resumes.
        u.failed = true;
      }
    });
  }

  private async writeDeferred(stream: Readable, id: string, offset: number): Promise<number> {
    const { db, segments } = this.deps;
    const write = segments.write?.bind(segments);
    if (!write) throw new Error('writeDeferred needs an area with write/sync');
    let u = this.unsynced.get(id);
    if (u && (u.failed || u.written !== offset)) {
      this.unsynced.delete(id);
      throw ERRORS.INVALID_OFFSET;
    }
    if (!u) {
      const found = await findUpload(db, id);
      if (!found) throw ERRORS.FILE_NOT_FOUND;
      if (found.completedAt || found.offset !== offset) throw ERRORS.INVALID_OFFSET;
      u = { row: found, written: offset, durable: found.offset, chain: Promise.resolve(), failed: false };
      this.unsynced.set(id, u);
    }
    const row = u.row;
    const atomic = this.deps.atomic(id);
    const digest = this.takeDigest(id, offset);
    let written = offset;
    // A body that fails (a checksum mismatch, past Upload-Length) throws here: nothing of it is accepted,
    // and the next PATCH starts where this one did (what it wrote beyond is overwritten then).
    // Written WRITE_BYTES at a time: one positional write per socket read would be hundreds per PATCH.
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      const data = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await write(id, written, data);
      digest?.update(data);
      written += data.length;
    };
    for await (const chunk of stream) {
      const b = chunk as Buffer;
      if (b.length === 0) continue;
      pending.push(b);
      pendingBytes += b.length;
      if (pendingBytes >= WRITE_BYTES) await flush();
    }
    if (pendingBytes > 0) await flush();
    u.written = written;
    if (digest) this.deps.digests.set(id, { offset: written, hash: digest });
    this.commitLater(id, u, written);
    if (atomic || written === row.length) {
      await u.chain;
      if (u.failed) {
        this.unsynced.delete(id);
        throw ERRORS.INVALID_OFFSET;
      }
      if (written === row.length) this.unsynced.delete(id);
    }
    return written;
  }

  /** The running MD5 of an upload written in order up to `offset` (a new one at 0); undefined else. */
  private takeDigest(id: string, offset: number): Hash | undefined {
    const d = this.deps.digests.get(id);
    this.deps.digests.delete(id);
    if (offset === 0) return createHash('md5');
    return d?.offset === offset ? d.hash : undefined;
  }

  /** Areas whose `put` is durable at once (S3): each segment is committed as soon as it is stored. */
  private async writeCommitted(stream: Readable, id: string, offset: number): Promise<number> {
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
