/**
 * What the storage routes need from an object store. Two backends implement it: `fs` (a local folder,
 * the embedded default) and `s3` (any S3-compatible service). Both pass test/storage/backend-contract.
 * Starting point written with the foundation; the storage work may refine it.
 */
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  size: number;
  lastModified: Date;
  /** Quoted, as S3 sends it: `"<md5 hex>"` for single-part uploads. */
  etag: string;
  contentType: string;
  /** The per-file access token (HBP's `x-amz-meta-token`). */
  token: string;
}

export interface PutOptions {
  contentType: string;
  token: string;
  /** Refuse (ObjectTooLarge) and store nothing when the body is longer. */
  maxBytes?: number;
}

export interface ByteRange {
  /** Inclusive offsets. */
  start: number;
  end: number;
}

export class ObjectTooLarge extends Error {}
/** The store could not be reached or failed; routes answer 503. */
export class StoreUnavailable extends Error {}

export interface ObjectStore {
  readonly kind: 'fs' | 's3';
  /** Creates the folder or bucket when missing. */
  init(): Promise<void>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Streams `body` in; the object becomes visible only once complete. */
  put(key: string, body: Readable, opts: PutOptions): Promise<ObjectInfo>;
  get(key: string, range?: ByteRange): Promise<{ info: ObjectInfo; body: Readable } | undefined>;
  /** False when there was nothing to delete. */
  delete(key: string): Promise<boolean>;
  /** Replaces the file token, keeping bytes and content type. */
  setToken(key: string, token: string): Promise<ObjectInfo | undefined>;
  /** Every object whose key starts with `prefix`, all pages. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Throws StoreUnavailable when the store cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
