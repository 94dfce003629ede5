/**
 * What the storage service needs from an object store. Two backends implement it: `fs` (a local folder,
 * the embedded default) and `s3` (any S3-compatible service). Both pass one shared contract suite
 * (test/storage/backend-contract.test.ts). Keys arrive already validated (src/storage/keys.ts).
 */
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  size: number;
  lastModified: Date;
  /** Quoted, as S3 sends it: `"<md5 hex>"` for single-part uploads; opaque otherwise. */
  etag: string;
  contentType: string;
  /** The per-file access token (HBP's `x-amz-meta-token`). */
  token: string;
  /**
   * Names this exact version inside the store, when the store has such a name (fs: the data file, which
   * is never rewritten in place). Opaque; never sent to clients. `get` with `expect` uses it to open the
   * version without reading the metadata again.
   */
  version?: string;
}

export interface PutOptions {
  contentType: string;
  token: string;
}

export interface ByteRange {
  /** Inclusive offsets. */
  start: number;
  end: number;
}

/** The store could not be reached or failed; routes answer 503. */
export class StoreUnavailable extends Error {
  override name = 'StoreUnavailable';
}

/**
 * `get` with `expect`: the object is no longer the version the caller described (it was overwritten or
 * deleted since). Nothing of the newer version has been read.
 */
export class ObjectChanged extends Error {
  override name = 'ObjectChanged';
}

export interface ObjectStore {
  readonly kind: 'fs' | 's3';
  /** Creates the folder or bucket when missing. */
  init(): Promise<void>;
  /**
   * S3 only: aborts multipart uploads started more than `olderThanMs` ago (left by a stopped instance);
   * the count, or undefined when the store does not list them.
   */
  abortStaleUploads?(olderThanMs: number): Promise<number | undefined>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /**
   * Streams `body` in. The object becomes visible only once the body has ended cleanly; when the body
   * errors (a client abort, a size limit, a refused rule) the promise rejects with that error and nothing
   * is left behind: no object, no partial object, no temporary file, and an older version stays intact.
   */
  put(key: string, body: Readable, opts: PutOptions): Promise<ObjectInfo>;
  /**
   * fs only: makes a complete local file (fsynced, on the store's filesystem) the object, by moving it in
   * rather than copying its bytes (resumable uploads, src/storage/tus/). The file is gone once resolved.
   * `md5` (hex), when the caller computed it as it wrote the file, spares reading it back.
   */
  adopt?(key: string, file: string, opts: PutOptions, md5?: string): Promise<ObjectInfo>;
  /**
   * The object's metadata and bytes (all, or one range), of one and the same version: the metadata
   * always describes the bytes of the body returned with it. With `expect` (an ObjectInfo this store
   * returned earlier), only that version is opened; when the object has changed since, it rejects with
   * ObjectChanged, so headers taken from `expect` can never go out with another version's bytes.
   */
  get(
    key: string,
    range?: ByteRange,
    expect?: ObjectInfo,
  ): Promise<{ info: ObjectInfo; body: Readable } | undefined>;
  /**
   * The whole of the version `expect` describes, in one buffer: for small objects read ahead (zips).
   * Rejects with ObjectChanged as `get` does.
   */
  read(key: string, expect: ObjectInfo): Promise<Buffer>;
  /**
   * fs only: the path of the data file of the version `expect` describes, for an image render process
   * that opens it read-only itself instead of receiving its bytes. Made by the store from its own
   * metadata, never from a request. The file may be gone by the time it is opened (overwritten or
   * deleted since): the reader must then fall back to `get`.
   */
  dataFile?(key: string, expect: ObjectInfo): string | undefined;
  /** False when there was nothing to delete. */
  delete(key: string): Promise<boolean>;
  /** Replaces the file token, keeping bytes and content type. Undefined when the object is missing. */
  setToken(key: string, token: string): Promise<ObjectInfo | undefined>;
  /** Every object whose key starts with `prefix`, all pages. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Throws StoreUnavailable when the store cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
