/**
 * The segments of resumable uploads on S3 (segments.ts): plain objects under the reserved prefix of the
 * bucket (keys.ts), one PutObject each, so only the calls every S3-compatible store has are used (s3rver,
 * the test peer, has no ListParts nor AbortMultipartUpload, on which @tus/s3-store depends). Nothing of an
 * upload in progress is a multipart upload: the file is written with the store's ordinary `put` once
 * complete, and what an abandoned upload leaves is deleted by the expiry sweep.
 */
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { StoreUnavailable } from '../backends/object-store.ts';
import { isNotFound, type S3ObjectStore, translate } from '../backends/s3.ts';
import { UPLOADS_PREFIX } from '../keys.ts';
import { checkUploadId, type SegmentArea, segmentName } from './segments.ts';

export class S3Segments implements SegmentArea {
  constructor(private readonly store: S3ObjectStore) {}

  private prefix(id: string): string {
    return `${UPLOADS_PREFIX}${checkUploadId(id)}/`;
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw translate(err);
    }
  }

  async put(id: string, start: number, data: Buffer): Promise<void> {
    const Key = this.prefix(id) + segmentName(start);
    await this.call(() =>
      this.store.client.send(new PutObjectCommand({ Bucket: this.store.bucket, Key, Body: data })),
    );
  }

  async list(id: string): Promise<Map<number, number>> {
    const prefix = this.prefix(id);
    const out = new Map<number, number>();
    let marker: string | undefined;
    for (;;) {
      const page = await this.call(() =>
        this.store.client.send(
          new ListObjectsCommand({ Bucket: this.store.bucket, Prefix: prefix, Marker: marker }),
        ),
      );
      const contents = page.Contents ?? [];
      for (const o of contents) {
        const name = o.Key?.slice(prefix.length) ?? '';
        if (/^\d{16}$/.test(name)) out.set(Number(name), o.Size ?? 0);
      }
      const last = contents[contents.length - 1]?.Key;
      if (!page.IsTruncated || last === undefined) return out;
      marker = page.NextMarker ?? last;
    }
  }

  async open(id: string, start: number, length: number): Promise<Readable> {
    const Key = this.prefix(id) + segmentName(start);
    const out = await this.call(() =>
      this.store.client.send(
        new GetObjectCommand({ Bucket: this.store.bucket, Key, Range: `bytes=0-${length - 1}` }),
      ),
    );
    if (!out.Body) throw new StoreUnavailable(`segment ${Key} has no body`);
    return out.Body as Readable;
  }

  async remove(id: string): Promise<void> {
    const prefix = this.prefix(id);
    for (const start of (await this.list(id)).keys()) {
      await this.call(async () => {
        try {
          await this.store.client.send(
            new DeleteObjectCommand({ Bucket: this.store.bucket, Key: prefix + segmentName(start) }),
          );
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      });
    }
  }
}
