/**
 * The files table kept in step with the object store. A row is what makes an object a file: it is
 * written by `completeUpload` (the one completion of every upload: plain, multipart body, TUS) in one
 * transaction with the settling of the upload's reservation, and removed with the delete. Reads, listings
 * and zips go by the row: an object without one (an upload cut off between the store and the database)
 * is neither listed nor served. It is repaired, not served on read, because the upload it came from was
 * never answered, and its owner and quota are settled only by the completion: serving it on first read
 * would make a GET write, race the completion still under way, and charge no one. Repairs:
 *   - at start and then every few minutes, in the background: reservations whose lease ran out name the
 *     uploads that never completed; an object found at such a key that the row does not describe is
 *     completed for that uploader, otherwise the reservation is dropped;
 *   - on the first start on a store (HBP's objects, or objects older than the table): every object is
 *     imported (owner: no one). Until that import has finished, this instance reads and lists the store
 *     as before the table existed, so nothing already stored disappears meanwhile;
 *   - `gatehouse storage reconcile`: the same full comparison, on demand (objects written around the
 *     service, rows whose object is gone).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { fileDeleted, fileUploaded, type Webhooks } from '../webhooks/webhooks.ts';
import type { ObjectInfo, ObjectStore } from './backends/object-store.ts';
import {
  deleteFileRow,
  deleteReservation,
  expiredReservations,
  type FileRow,
  fileKeysAfter,
  filesByKeys,
  filesUnder,
  findFile,
  importFiles,
  isImported,
  lockOwner,
  markImported,
  refreshFile,
  rowInfo,
  upsertFile,
} from './files-store.ts';
import { isReservedKey } from './keys.ts';
import type { QuotaReservation } from './quotas.ts';

/** What the files table's operations use (a part of StorageDeps). */
export interface FilesDeps {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
  readonly objects: ObjectStore;
  readonly catalog: FileCatalog;
  /** Cached image variants, forgotten when their source changes. */
  readonly images: { forget(sourceKey: string): Promise<void> };
  /** Queues file.uploaded and file.deleted webhooks in the change's transaction (webhooks/). */
  readonly webhooks?: Webhooks;
}

/**
 * Keys this instance has recently seen a row for, so that the reads of a file do not each query the table
 * (on the embedded database every statement runs on the event loop: the lookup bounded the metadata read
 * at a tenth of its rate before). Only presence is remembered, never absence, because a stale "present"
 * is harmless: a row goes only with its object (`removeFile` deletes both in one transaction; `reconcile`
 * drops rows whose object is gone), and every read still asks the store, which then answers "missing". A
 * stale "absent" would hide a file that was just uploaded through another instance. Entries last
 * `PRESENCE_TTL_MS` (bounding rows deleted around the service, by hand in SQL) and at most
 * `PRESENCE_MAX` keys are kept (the oldest go first). A lookup that was under way while a row was
 * forgotten is not remembered (the epoch), so a read racing a delete cannot bring the key back.
 */
export class RowPresence {
  private readonly seen = new Map<string, number>();
  private epoch = 0;

  constructor(
    private readonly ttlMs = PRESENCE_TTL_MS,
    private readonly max = PRESENCE_MAX,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether `key` had a row within the last `ttlMs`. */
  has(key: string): boolean {
    const until = this.seen.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.seen.delete(key);
    return false;
  }

  /** Taken before a lookup, handed to `remember` after it. */
  begin(): number {
    return this.epoch;
  }

  /** Records that a lookup begun at `epoch` found the row of `key`. */
  remember(key: string, epoch: number): void {
    if (epoch !== this.epoch) return;
    this.seen.delete(key);
    if (this.seen.size >= this.max) {
      const oldest = this.seen.keys().next();
      if (!oldest.done) this.seen.delete(oldest.value);
    }
    this.seen.set(key, this.now() + this.ttlMs);
  }

  /** After a row was removed (its transaction committed). */
  forget(key: string): void {
    this.seen.delete(key);
    this.epoch++;
  }
}

/** How long a key's row is taken as present without asking the table again. */
const PRESENCE_TTL_MS = 2000;
/** Keys remembered at most (about 100 bytes each with the key). */
const PRESENCE_MAX = 20_000;

/** How long a plain upload's reservation lasts between renewals (the upload renews it while it runs). */
export const UPLOAD_LEASE_MS = 5 * 60_000;
/** Rows read per page of a listing. */
const PAGE = 1000;

/**
 * Whether this instance reads the table yet (`imported`), and the background repairs. `imported` turns
 * true once the store's objects are known to be in the table (at once on every start after the first).
 */
export class FileCatalog {
  imported = false;
  /** Rows seen recently (reads skip the table for them). */
  readonly presence = new RowPresence();
  /** Settles when the start's import and repair pass is over (tests, the CLI wait for it). */
  ready: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  /** A name of the store (what storage.imports records). */
  static storeName(config: Config): string {
    return config.S3_ENDPOINT
      ? `s3:${config.S3_ENDPOINT}/${config.S3_BUCKET}`
      : `fs:${config.DATA_DIR.replace(/\/+$/, '')}/storage`;
  }

  /**
   * Learns whether the store was imported (one query, awaited, so that no request is read by the store
   * on an instance that should read the table), then starts the background work: the first import when
   * none is recorded, and the repair of uploads cut off, now and every half lease. The import and the
   * repairs never hold the start; a failure is logged and retried at the next pass.
   */
  async start(deps: FilesDeps, log: FastifyBaseLogger): Promise<void> {
    const name = FileCatalog.storeName(deps.config);
    this.imported = await isImported(deps.db, name);
    const pass = async () => {
      if (!this.imported) {
        if (await isImported(deps.db, name)) this.imported = true;
        else {
          // Stopped between pages at shutdown (the next start imports again: what is in is kept).
          const report = await reconcile(deps, { removeStale: false, stopped: () => this.stopped });
          if (this.stopped) return;
          await markStoreImported(deps, report.imported);
          this.imported = true;
          if (report.imported > 0)
            log.info({ imported: report.imported }, 'storage: existing objects imported into storage.files');
        }
      }
      const repaired = await repairInterrupted(deps);
      if (repaired.completed > 0)
        log.warn(
          { completed: repaired.completed },
          'storage: uploads cut off before their row was written were completed',
        );
    };
    const run = () => {
      this.running = pass().catch((err: unknown) =>
        log.error({ err }, 'storage: files table repair pass failed'),
      );
      return this.running;
    };
    this.ready = run();
    const again = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => void run().finally(again), UPLOAD_LEASE_MS / 2);
      this.timer.unref();
    };
    void this.ready.finally(again);
  }

  /** Stops the repairs, waiting for a pass under way (before the database closes). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}

/** Records that the configured store's objects are in the table (the first start then skips its import). */
export async function markStoreImported(
  deps: Pick<FilesDeps, 'config' | 'db' | 'clock'>,
  imported: number,
): Promise<void> {
  await markImported(deps.db, FileCatalog.storeName(deps.config), imported, deps.clock.now());
}

/** What a finished upload hands to `completeUpload`. */
export interface CompletedUpload {
  /** The object as the store returned it once written (`put`, or a TUS store's final object). */
  info: ObjectInfo;
  /** The uploader's user id; null for the admin secret (or an anonymous upload the rules allowed). */
  ownerId: string | null;
  /** The upload's reservation (quotas.ts reserveQuota), settled here; undefined when it has none. */
  reservation: QuotaReservation | undefined;
}

/**
 * The one completion of every upload (plain and multipart bodies here, TUS in storage/uploads): writes
 * the file's row (an overwrite updates it; its owner becomes the new uploader) and settles the upload's
 * reservation in one transaction, under the uploader's quota lock, then forgets the image variants of the
 * version replaced. Called after the object is in the store; it never refuses on quota (admission was
 * the reservation). When it fails, the reservation stays and the repair pass completes the upload later.
 */
export async function completeUpload(deps: FilesDeps, upload: CompletedUpload): Promise<ObjectInfo> {
  const { info, ownerId, reservation } = upload;
  await deps.db.transaction(async (tx) => {
    if (ownerId !== null) await lockOwner(tx, ownerId);
    await upsertFile(tx, info, ownerId, deps.clock.now());
    if (reservation) await deleteReservation(tx, reservation.id);
    await deps.webhooks?.queue(tx, fileUploaded(info, ownerId));
  });
  await deps.images.forget(info.key);
  return info;
}

/**
 * Whether the object at `key`, if the store has one, is a file: its row exists, or the table is not what
 * this instance reads yet (before the first import, the store is read as it was before the table).
 * `undefined` when a recent lookup already said yes (no promise, no statement: the hot read path).
 */
export function hasRow(deps: FilesDeps, key: string): Promise<boolean> | undefined {
  const { catalog } = deps;
  if (!catalog.imported || catalog.presence.has(key)) return undefined;
  const epoch = catalog.presence.begin();
  return findFile(deps.db, key).then((row) => {
    if (row) catalog.presence.remember(key, epoch);
    return row !== undefined;
  });
}

/** Every file under `prefix`, by the table (keyset pages), in byte order. */
export async function* filesWithPrefix(deps: FilesDeps, prefix: string): AsyncIterable<ObjectInfo> {
  let after = '';
  for (;;) {
    const rows = await filesUnder(deps.db, prefix, after, PAGE);
    for (const row of rows) yield rowInfo(row);
    if (rows.length < PAGE) return;
    after = (rows[rows.length - 1] as FileRow).key;
  }
}

/**
 * Removes a file's row and then its object, in one transaction: a store that fails the delete leaves
 * the row (and the file) in place. False when there was no object.
 */
export async function removeFile(deps: FilesDeps, key: string, removeObject: () => Promise<boolean>) {
  const removed = await deps.db.transaction(async (tx) => {
    // The owner, for the file.deleted webhook (read only when one is sent).
    const owner = deps.webhooks?.wants('file.deleted') ? ((await findFile(tx, key))?.ownerId ?? null) : null;
    await deleteFileRow(tx, key);
    const gone = await removeObject();
    if (gone) await deps.webhooks?.queue(tx, fileDeleted(key, owner));
    return gone;
  });
  deps.catalog.presence.forget(key);
  await deps.images.forget(key);
  return removed;
}

/** After a token change in the store: the row follows (a row-less object stays row-less). */
export async function fileChanged(deps: FilesDeps, info: ObjectInfo): Promise<void> {
  await refreshFile(deps.db, info);
}

/**
 * Uploads cut off: reservations whose lease ran out. For each, the object at its key, when the row does
 * not describe it, was written by that upload and never completed: it is completed now, for the same
 * uploader. Otherwise the upload never wrote (or its completion did commit) and the reservation goes.
 */
export async function repairInterrupted(deps: FilesDeps): Promise<{ completed: number; dropped: number }> {
  let completed = 0;
  let dropped = 0;
  for (;;) {
    const expired = await expiredReservations(deps.db, deps.clock.now(), 100);
    if (expired.length === 0) return { completed, dropped };
    for (const r of expired) {
      const [object, row] = await Promise.all([deps.objects.head(r.key), findFile(deps.db, r.key)]);
      if (object && !(row && row.etag === object.etag && row.size === object.size)) {
        const reservation = { ...r, length: r.bytes, expiresAt: r.expiresAt.toISOString() };
        await completeUpload(deps, { info: object, ownerId: r.ownerId, reservation });
        completed++;
      } else {
        await deleteReservation(deps.db, r.id);
        dropped++;
      }
    }
  }
}

export interface ReconcileReport {
  /** Objects found without a row, now imported (owner: no one). */
  imported: number;
  /** Rows whose object had changed (size or ETag), brought up to date. */
  updated: number;
  /** Rows whose object is gone, removed (only with `removeStale`). */
  removed: number;
  /** Objects compared. */
  objects: number;
}

/**
 * The full comparison of the store and the table: every object listed, page by page, against the rows
 * of its keys. An object without a row is imported, one the row describes wrongly is updated (owner
 * kept); with `removeStale`, rows whose object is no longer in the store are removed.
 */
export async function reconcile(
  deps: Pick<FilesDeps, 'db' | 'objects' | 'clock'>,
  opts: { removeStale: boolean; stopped?: () => boolean },
): Promise<ReconcileReport> {
  const stopped = opts.stopped ?? (() => false);
  const report: ReconcileReport = { imported: 0, updated: 0, removed: 0, objects: 0 };
  let page: ObjectInfo[] = [];
  const flush = async () => {
    const rows = await filesByKeys(
      deps.db,
      page.map((o) => o.key),
    );
    const missing: ObjectInfo[] = [];
    for (const object of page) {
      const row = rows.get(object.key);
      if (!row) missing.push(object);
      else if (row.etag !== object.etag || row.size !== object.size || row.token !== object.token) {
        await refreshFile(deps.db, object);
        report.updated++;
      }
    }
    report.imported += await importFiles(deps.db, missing, deps.clock.now());
    report.objects += page.length;
    page = [];
  };
  for await (const object of deps.objects.list('')) {
    // The parts of resumable uploads in progress (S3: the bucket's reserved prefix) are no files.
    if (isReservedKey(object.key)) continue;
    page.push(object);
    if (page.length >= PAGE) await flush();
    if (stopped()) return report;
  }
  await flush();
  if (opts.removeStale && !stopped()) {
    let after = '';
    for (;;) {
      const keys = await fileKeysAfter(deps.db, after, PAGE);
      for (const key of keys) {
        if (!(await deps.objects.head(key)) && (await deleteFileRow(deps.db, key))) report.removed++;
      }
      if (keys.length < PAGE) break;
      after = keys[keys.length - 1] as string;
    }
  }
  return report;
}
