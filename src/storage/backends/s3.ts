/**
 * The `s3` object store: AWS SDK v3 against any S3-compatible service (AWS, MinIO, R2, Ceph, s3rver),
 * path-style, one bucket. The file token lives in user metadata (`x-amz-meta-token`) as in HBP, so
 * buckets written by HBP are served unchanged.
 */
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListMultipartUploadsCommand,
  type ListMultipartUploadsCommandOutput,
  ListObjectsCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { ByteRange, ObjectInfo, ObjectStore, PutOptions } from './object-store.ts';
import { ObjectChanged, StoreUnavailable } from './object-store.ts';

export interface S3Settings {
  endpoint: string;
  sslEnabled: boolean;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Bytes per multipart part (≥ 5 MiB); memory per upload is about partSize × queueSize. */
  partSize?: number;
  queueSize?: number;
  /** Keys per listing page (S3's maximum, 1000, by default; tests use less to cross pages). */
  listPageSize?: number;
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

/** Network failures and 5xx answers mean "unavailable" (503); anything else is a real error. */
export function translate(err: unknown): unknown {
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  if (
    (e.code && NETWORK_CODES.has(e.code)) ||
    e.name === 'TimeoutError' ||
    (status !== undefined && status >= 500) ||
    (status === undefined && e.name !== 'AbortError' && !(err instanceof StoreUnavailable) && isNetwork(err))
  ) {
    return new StoreUnavailable('the object store could not be reached', { cause: err });
  }
  return err;
}

function isNetwork(err: unknown): boolean {
  let e: unknown = err;
  for (let i = 0; i < 4 && e; i++) {
    const code = (e as { code?: string }).code;
    if (code && NETWORK_CODES.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function isPreconditionFailed(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'PreconditionFailed' || e.$metadata?.httpStatusCode === 412;
}

export function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
}

/** `x-amz-copy-source` wants each key segment URL-encoded. */
function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

export function endpointUrl(endpoint: string, sslEnabled: boolean): string {
  return /^https?:\/\//i.test(endpoint) ? endpoint : `${sslEnabled ? 'https' : 'http'}://${endpoint}`;
}

export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  readonly bucket: string;
  private ready = false;

  constructor(private readonly s: S3Settings) {
    this.bucket = s.bucket;
    this.client = new S3Client({
      endpoint: endpointUrl(s.endpoint, s.sslEnabled),
      region: s.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
      // Third-party servers (MinIO, s3rver, older Ceph) reject the newer default checksum headers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 2,
      // Fail fast when the store is down, so callers get a 503 instead of a hung request.
      requestHandler: { connectionTimeout: 3000, requestTimeout: 60_000 },
    });
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw translate(err);
    }
  }

  async init(): Promise<void> {
    await this.call(async () => {
      try {
        await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
      } catch (err) {
        if (!isNotFound(err)) throw err;
        try {
          await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
        } catch (e) {
          const name = (e as { name?: string }).name;
          if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw e;
        }
      }
    });
    this.ready = true;
  }

  /**
   * Aborts the bucket's multipart uploads started more than `olderThanMs` ago: those of an instance
   * killed mid-upload, whose parts S3 keeps (and bills) until aborted, though no object ever shows them.
   * Younger ones may belong to a live instance and are left alone. Returns how many were aborted, or
   * undefined when the store cannot list uploads (s3rver; a lifecycle rule does this job then).
   */
  async abortStaleUploads(olderThanMs: number, now = new Date()): Promise<number | undefined> {
    let aborted = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      let page: ListMultipartUploadsCommandOutput;
      try {
        page = await this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
        );
      } catch (err) {
        const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
        if (e.name === 'NotImplemented' || e.$metadata?.httpStatusCode === 501) return undefined;
        throw translate(err);
      }
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated) continue;
        if (now.getTime() - u.Initiated.getTime() < olderThanMs) continue;
        await this.call(() =>
          this.client.send(
            new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }),
          ),
        );
        aborted += 1;
      }
      if (!page.IsTruncated) return aborted;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    return this.call(async () => {
      try {
        const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
        return this.toInfo(key, out);
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    });
  }

  private toInfo(
    key: string,
    out: Pick<
      HeadObjectCommandOutput,
      'ContentLength' | 'LastModified' | 'ETag' | 'ContentType' | 'Metadata'
    >,
  ): ObjectInfo {
    return {
      key,
      size: out.ContentLength ?? 0,
      lastModified: out.LastModified ?? new Date(0),
      etag: out.ETag ?? '""',
      contentType: out.ContentType ?? 'application/octet-stream',
      token: out.Metadata?.['token'] ?? '',
    };
  }

  async put(key: string, body: Readable, opts: PutOptions): Promise<ObjectInfo> {
    const upload = new Upload({
      client: this.client,
      params: {
        Bucket: this.bucket,
        Key: key,
        Body: body,
        ContentType: opts.contentType,
        Metadata: { token: opts.token },
      },
      partSize: this.s.partSize ?? 5 * 1024 * 1024,
      queueSize: this.s.queueSize ?? 2,
      // A failed upload aborts its multipart upload, so no parts linger in the bucket.
      leavePartsOnError: false,
    });
    let bodyError: unknown;
    body.once('error', (err) => {
      bodyError = err;
    });
    try {
      await upload.done();
    } catch (err) {
      // The body's own error (size limit, refused rule, client gone) says more than the SDK's wrapper.
      throw bodyError ?? translate(err);
    }
    if (bodyError) throw bodyError;
    const info = await this.head(key);
    if (!info) throw new StoreUnavailable('the object vanished right after it was written');
    return info;
  }

  async get(
    key: string,
    range?: ByteRange,
    expect?: ObjectInfo,
  ): Promise<{ info: ObjectInfo; body: Readable } | undefined> {
    const out = await this.call(async () => {
      try {
        return await this.client.send(
          new GetObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Range: range ? `bytes=${range.start}-${range.end}` : undefined,
            // S3 answers 412 instead of another version's bytes.
            IfMatch: expect?.etag,
          }),
        );
      } catch (err) {
        if (expect && (isNotFound(err) || isPreconditionFailed(err)))
          throw new ObjectChanged(`${key} changed since its metadata was read`, { cause: err });
        if (isNotFound(err)) return undefined;
        throw err;
      }
    });
    if (!out) return undefined;
    const body = out.Body as Readable;
    const total = /\/(\d+)$/.exec(out.ContentRange ?? '')?.[1];
    const info = this.toInfo(key, { ...out, ContentLength: total ? Number(total) : out.ContentLength });
    // Some S3-compatible servers (s3rver among them) ignore If-Match on GET: check the answer as well.
    if (expect && info.etag !== expect.etag) {
      body.destroy();
      throw new ObjectChanged(`${key} changed since its metadata was read`);
    }
    return { info, body };
  }

  async read(key: string, expect: ObjectInfo): Promise<Buffer> {
    const got = await this.get(key, undefined, expect);
    if (!got) throw new ObjectChanged(`${key} changed since its metadata was read`);
    const chunks: Buffer[] = [];
    await this.call(async () => {
      for await (const c of got.body) chunks.push(c as Buffer);
    });
    return Buffer.concat(chunks);
  }

  async delete(key: string): Promise<boolean> {
    // S3 deletes are idempotent and say nothing about existence, so ask first.
    if (!(await this.head(key))) return false;
    await this.call(() => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })));
    return true;
  }

  async setToken(key: string, token: string): Promise<ObjectInfo | undefined> {
    const info = await this.head(key);
    if (!info) return undefined;
    await this.call(() =>
      this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: key,
          CopySource: copySource(this.bucket, key),
          MetadataDirective: 'REPLACE',
          ContentType: info.contentType,
          Metadata: { token },
        }),
      ),
    );
    return this.head(key);
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    // ListObjects (v1) paged by Marker = last key: supported by every S3 implementation, while
    // s3rver 3.7 cannot mint V2 continuation tokens on current Node (its cipher, DES, is gone).
    let marker: string | undefined;
    for (;;) {
      const page = await this.call(() =>
        this.client.send(
          new ListObjectsCommand({
            Bucket: this.bucket,
            Prefix: prefix,
            Marker: marker,
            MaxKeys: this.s.listPageSize,
          }),
        ),
      );
      const keys = (page.Contents ?? []).map((o) => o.Key).filter((k): k is string => k !== undefined);
      // Listings carry no content type or token: fetch them, a few at a time, keeping the order.
      for (let i = 0; i < keys.length; i += 8) {
        const heads = await Promise.all(keys.slice(i, i + 8).map((k) => this.head(k)));
        for (const h of heads) if (h) yield h;
      }
      const last = keys[keys.length - 1];
      if (!page.IsTruncated || last === undefined) return;
      marker = page.NextMarker ?? last;
    }
  }

  async ping(): Promise<void> {
    if (!this.ready) return this.init();
    await this.call(() => this.client.send(new HeadBucketCommand({ Bucket: this.bucket })));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
