/**
 * Resumable uploads (TUS 1.0.0) at /storage/uploads: the decisions around the protocol, which @tus/server
 * speaks (routes/tus.ts hands it each request). Creation checks the target path and the rules' `write`
 * with the caller's identity and records the caller as the upload's owner; every later request of another
 * caller finds nothing (404). Completion hands the assembled bytes to the plain upload's path
 * (upload.ts `uploadFile`), so the file appears at once with the same content type, token, rules and image
 * cache handling as a plain upload. Uploads not finished within STORAGE_UPLOAD_EXPIRY are swept.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { Server } from '@tus/server';
import type { FastifyBaseLogger } from 'fastify';
import type { BackgroundTasks } from '../../background.ts';
import type { Clock } from '../../clock.ts';
import type { Database } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { type ParsedKey, parseKey } from '../keys.ts';
import { releaseQuota, reserveQuota } from '../quotas.ts';
import { NOT_YET_KNOWN } from '../rules/expression.ts';
import { type Caller, refused, ruleInput, type StorageDeps, store } from '../service.ts';
import { uploaderOf, uploadFile } from '../upload.ts';
import { SegmentStore } from './datastore.ts';
import type { SegmentArea } from './segments.ts';
import {
  deleteUpload,
  expiredUploads,
  findUpload,
  insertUpload,
  markCompleted,
  type UploadRow,
} from './uploads-store.ts';

export const TUS_PATH = '/storage/uploads';

export interface TusDeps extends StorageDeps {
  readonly db: Database;
  readonly clock: Clock;
  readonly segments: SegmentArea;
  readonly log: FastifyBaseLogger;
  /** Runs work now and then (background.ts); the sweep runs there, so shutdown stops and waits for it. */
  readonly every: BackgroundTasks['every'];
}

/** Who an upload belongs to: the same string for every request of the same caller. */
export function ownerOf(caller: Caller): string {
  if (caller.admin) return 'admin';
  const id = caller.auth?.['user-id'];
  if (caller.auth && typeof id === 'string' && id !== '') return `user:${id}`;
  return 'anonymous';
}

/** A new upload as the client declared it (routes/tus.ts parses the headers). */
export interface Declared {
  length: number;
  metadata: Record<string, string | null>;
}

function metaString(m: Record<string, string | null>, ...names: string[]): string | undefined {
  for (const n of names) {
    const v = m[n];
    if (typeof v === 'string' && v !== '') return v;
  }
  return undefined;
}

/** The target key from `Upload-Metadata` `path` (with or without its leading "/"). */
export function targetKey(metadata: Record<string, string | null>): ParsedKey {
  const raw = metaString(metadata, 'path');
  if (raw === undefined)
    throw new AppError('INVALID_KEY', 'Upload-Metadata must name the file: a "path" entry (base64).');
  // The path is already decoded (base64 in the header): escape it so that parseKey decodes it once.
  const key = parseKey(escapeKey(raw.startsWith('/') ? raw.slice(1) : raw));
  if (key.folder) throw new AppError('FOLDER_UPLOAD');
  return key;
}

function declaredType(metadata: Record<string, string | null>): string | undefined {
  return metaString(metadata, 'contentType', 'filetype', 'type');
}

export class TusUploads {
  readonly server: Server;
  /** Uploads with a PATCH carrying a checksum in progress (the store commits those only at their end). */
  private readonly checksummed = new Map<string, number>();
  /** Completions running in this process, by upload id (a HEAD may ask while a PATCH completes). */
  private readonly completing = new Map<string, Promise<void>>();
  private readonly datastore: SegmentStore;

  constructor(private readonly deps: TusDeps) {
    const datastore = new SegmentStore({
      digests: new Map(),
      db: deps.db,
      segments: deps.segments,
      expiryMs: deps.config.STORAGE_UPLOAD_EXPIRY,
      atomic: (id) => (this.checksummed.get(id) ?? 0) > 0,
      terminate: (id) => this.terminate(id),
    });
    this.datastore = datastore;
    this.server = new Server({
      path: TUS_PATH,
      datastore,
      maxSize: deps.config.STORAGE_MAX_UPLOAD_SIZE,
      relativeLocation: true,
      // The route (routes/tus.ts) set the id when it inserted the row.
      namingFunction: (req) => {
        const id = pendingIds.get(req as unknown as Request);
        if (!id) throw new Error('an upload was created without its row');
        return id;
      },
      onUploadFinish: async (req, upload) => {
        const caller = callers.get(req as unknown as Request);
        if (!caller) throw new Error('an upload finished without its caller');
        await this.completeById(upload.id, caller);
        return {};
      },
      onResponseError: (req, err) => {
        // The route answers with the original error (AppError, store or database outage).
        if (err instanceof Error) failures.set(req as unknown as Request, err);
        return undefined;
      },
    });
  }

  // -------------------------------------------------------------------------------------------------
  // Creation and ownership

  /**
   * Checks a new upload (target path, size limit, the rules' `write` with the caller's identity) and
   * records it with its owner. Nothing is stored when this throws.
   */
  async create(caller: Caller, declared: Declared): Promise<UploadRow> {
    const { config, objects, rules, db, clock } = this.deps;
    const key = targetKey(declared.metadata);
    if (declared.length > config.STORAGE_MAX_UPLOAD_SIZE)
      throw new AppError(
        'PAYLOAD_TOO_LARGE',
        `Upload-Length is larger than the upload limit of ${config.STORAGE_MAX_UPLOAD_SIZE} bytes (Tus-Max-Size).`,
      );
    if (!caller.admin) {
      const existing = await store(() => objects.head(key.key));
      const op = existing ? 'update' : 'create';
      const name =
        metaString(declared.metadata, 'filename', 'name') ?? key.key.slice(key.key.lastIndexOf('/') + 1);
      // The declared type stands in for now; completion decides again on the bytes (upload.ts).
      const input = ruleInput(key, caller, {
        name,
        size: declared.length,
        mimetype: declaredType(declared.metadata) ?? NOT_YET_KNOWN,
      });
      const decision = rules.decide(op, input);
      if (decision.allowed === false) throw refused(this.deps, op, input, caller, decision);
    }
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + config.STORAGE_UPLOAD_EXPIRY);
    // The declared length against the uploader's quota (413 QUOTA_EXCEEDED), held until completion,
    // termination or expiry.
    const reservation = await reserveQuota(this.deps, {
      ownerId: uploaderOf(caller),
      key: key.key,
      bytes: declared.length,
      expiresAt,
    });
    try {
      return await insertUpload(db, {
        id: randomBytes(16).toString('hex'),
        owner: ownerOf(caller),
        key: key.key,
        length: declared.length,
        metadata: declared.metadata,
        createdAt: now,
        expiresAt,
        reservation,
      });
    } catch (err) {
      await releaseQuota(this.deps, reservation).catch(() => {});
      throw err;
    }
  }

  /** The caller's upload; 404 for one that does not exist, has expired, or is someone else's. */
  async owned(id: string, caller: Caller): Promise<UploadRow> {
    const valid = /^[0-9a-f]{32}$/.test(id);
    const row = valid ? (this.datastore.cachedRow(id) ?? (await findUpload(this.deps.db, id))) : undefined;
    if (!row || row.owner !== ownerOf(caller) || row.expiresAt.getTime() <= this.deps.clock.now().getTime())
      throw new AppError('NOT_FOUND', 'No such upload (it may have expired).');
    return row;
  }

  /** A creation refused by @tus/server after the row was inserted: forget it. */
  async forget(id: string): Promise<void> {
    await this.terminate(id);
  }

  /** Marks a PATCH with a checksum as in progress on `id` until `done` is called. */
  checksumInProgress(id: string): () => void {
    this.checksummed.set(id, (this.checksummed.get(id) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.checksummed.get(id) ?? 1) - 1;
      if (n <= 0) this.checksummed.delete(id);
      else this.checksummed.set(id, n);
    };
  }

  // -------------------------------------------------------------------------------------------------
  // Completion

  /**
   * Puts a complete upload in place through the plain upload's path. A refusal there (the rules on the
   * real content type, the size) removes the upload: it can never complete. A store outage leaves it, and
   * the next HEAD (a client's resume) or PATCH tries again.
   */
  async completeById(id: string, caller: Caller): Promise<void> {
    const running = this.completing.get(id);
    if (running !== undefined) return running;
    const p = (async () => {
      const row = await findUpload(this.deps.db, id);
      if (!row) throw new AppError('NOT_FOUND', 'No such upload (it may have expired).');
      if (row.completedAt || row.offset < row.length) return;
      await this.complete(row, caller);
    })();
    this.completing.set(id, p);
    try {
      await p;
    } finally {
      this.completing.delete(id);
    }
  }

  /** For HEAD: an upload whose last byte is committed but that is not in place yet is completed first. */
  async completeIfDue(row: UploadRow, caller: Caller): Promise<void> {
    if (!row.completedAt && row.offset === row.length) await this.completeById(row.id, caller);
  }

  private async complete(row: UploadRow, caller: Caller): Promise<void> {
    const { segments } = this.deps;
    const chain = await store(() => this.chain(row));
    const body = Readable.from(
      (async function* () {
        for (const [start, length] of chain) {
          const part = await store(() => segments.open(row.id, start, length));
          yield* part;
        }
      })(),
      { objectMode: false },
    );
    // The caller as a plain upload's: the same rules, decided on the same inputs.
    const asPlain: Caller = { ...caller, method: 'POST', query: {} };
    try {
      await uploadFile(this.deps, parseKey(escapeKey(row.key)), asPlain, {
        stream: body,
        mimetype: declaredType(row.metadata),
        filename: metaString(row.metadata, 'filename', 'name'),
        declaredSize: row.length,
        // The folder backend keeps the upload as one file: it becomes the object without a copy.
        localFile: segments.localFile?.(row.id),
        localMd5: this.datastore.md5Of(row.id, row.length),
        reservation: row.reservation ?? undefined,
      });
    } catch (err) {
      body.destroy();
      if (err instanceof AppError && err.statusCode < 500) await this.terminate(row.id);
      throw err;
    }
    await markCompleted(this.deps.db, row.id);
    // The parts are no longer needed; the row stays (HEAD answers the full offset) until it expires.
    await segments.remove(row.id).catch((err: unknown) => {
      this.deps.log.warn({ err, upload: row.id }, 'could not remove the parts of a completed upload');
    });
  }

  /** The committed segments in order, as [start, bytes]; an error when one is missing. */
  private async chain(row: UploadRow): Promise<[number, number][]> {
    const sizes = await this.deps.segments.list(row.id);
    const out: [number, number][] = [];
    let pos = 0;
    while (pos < row.length) {
      const size = sizes.get(pos);
      if (!size) throw new Error(`upload ${row.id}: the segment at ${pos} is missing`);
      const take = Math.min(size, row.length - pos);
      out.push([pos, take]);
      pos += take;
    }
    return out;
  }

  /** How many segments an upload holds (diagnostics, tests). */
  async partsOf(id: string): Promise<number> {
    return (await this.deps.segments.list(id)).size;
  }

  // -------------------------------------------------------------------------------------------------
  // Termination and expiry

  /** Removes an upload: its parts first, then its row. */
  async terminate(id: string): Promise<void> {
    this.datastore.forget(id);
    await store(() => this.deps.segments.remove(id));
    const row = await deleteUpload(this.deps.db, id);
    // A completed upload's reservation was settled with its file; an unfinished one's is given back.
    if (row?.reservation && !row.completedAt)
      await releaseQuota(this.deps, row.reservation).catch((err: unknown) => {
        this.deps.log.warn({ err, upload: id }, 'could not release the quota reservation of an upload');
      });
  }

  /** Removes every upload whose time is up; how many. */
  async sweep(): Promise<number> {
    let removed = 0;
    for (;;) {
      const rows = await expiredUploads(this.deps.db, this.deps.clock.now(), 100);
      for (const row of rows) {
        await this.terminate(row.id);
        removed++;
      }
      if (rows.length < 100) return removed;
    }
  }

  /** Sweeps now and then (every quarter of the expiry, at most every minute), as a background task. */
  start(): void {
    const every = Math.max(1000, Math.min(60_000, Math.floor(this.deps.config.STORAGE_UPLOAD_EXPIRY / 4)));
    this.deps.every('expired uploads sweep', every, async () => {
      const removed = await this.sweep();
      if (removed > 0) this.deps.log.info({ removed }, 'removed expired resumable uploads');
    });
  }
}

/** Escapes a stored key for parseKey, which decodes once. */
function escapeKey(key: string): string {
  return encodeURIComponent(key).replace(/%2F/g, '/');
}

/** Per-request state between the route and the @tus/server hooks, keyed by the request handed over. */
export const pendingIds = new WeakMap<Request, string>();
export const callers = new WeakMap<Request, Caller>();
export const failures = new WeakMap<Request, Error>();
