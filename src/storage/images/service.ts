/**
 * The image service behind `GET /storage/o/<file>?w=…`: turns a source object (already authorised by
 * the storage rules) and the transform parameters into a variant, answering from the variant ETag
 * (304), the local cache, or a render in the bounded queue — in that order.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import sharp from 'sharp';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { VariantCache } from './cache.ts';
import { chooseFormat, type ImageParams, normalisedKey } from './params.ts';
import { CONTENT_TYPES, type OutputFormat, renderImage } from './pipeline.ts';
import { TransformQueue } from './queue.ts';

/** Changes whenever the same parameters could give different bytes (pipeline or sharp upgrade). */
const PIPELINE_VERSION = `1/${sharp.versions.sharp}/${sharp.versions.vips}`;

/** The object to transform, as the storage route found it after the rules allowed the read. */
export interface ImageSource {
  key: string;
  /** The object's ETag, quoted as the store gives it. */
  etag: string;
  size: number;
  /** When the object was last written; lets If-Modified-Since answer 304 too. */
  lastModified?: Date;
  /**
   * Opens the object's bytes, with the ETag of what was opened; called only when a render is needed.
   * Throw an AppError (404) if the object has gone since the rules saw it.
   */
  open(): Promise<{ body: Readable | Buffer; etag: string }>;
}

export interface TransformRequest {
  params: ImageParams;
  accept?: string | undefined;
  ifNoneMatch?: string | undefined;
  ifModifiedSince?: string | undefined;
}

export type TransformOutcome =
  | { status: 304; etag: string; vary: boolean }
  | {
      status: 200;
      etag: string;
      vary: boolean;
      data: Buffer;
      contentType: string;
      format: OutputFormat;
      fromCache: boolean;
    };

/** True when an If-None-Match header lists `etag` (weak comparison, RFC 9110 §13.1.2). */
export function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  const bare = (t: string) => t.trim().replace(/^W\//, '');
  return ifNoneMatch.split(',').some((t) => t.trim() === '*' || bare(t) === bare(etag));
}

/**
 * RFC 9110 §13.2.2: If-None-Match decides when present; otherwise If-Modified-Since against the
 * source's date, since a variant changes only when its source does.
 */
function notModified(req: TransformRequest, etag: string, lastModified: Date | undefined): boolean {
  if (req.ifNoneMatch) return matchesEtag(req.ifNoneMatch, etag);
  if (!req.ifModifiedSince || !lastModified) return false;
  const since = Date.parse(req.ifModifiedSince);
  return !Number.isNaN(since) && Math.floor(lastModified.getTime() / 1000) <= Math.floor(since / 1000);
}

/** The whole body, refused past `limit`; a store that fails mid-stream is a 503, not a 500. */
async function readAll(source: Readable | Buffer, limit: number): Promise<Buffer> {
  if (Buffer.isBuffer(source)) return source;
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of source) {
      const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
      length += b.length;
      if (length > limit) throw new AppError('IMAGE_TOO_LARGE');
      chunks.push(b);
    }
  } catch (err) {
    source.destroy();
    if (err instanceof AppError) throw err;
    throw new AppError('STORAGE_UNAVAILABLE', undefined, { cause: err });
  }
  return Buffer.concat(chunks);
}

export class ImageService {
  readonly queue: TransformQueue;
  readonly cache: VariantCache;
  /** Renders done and cache hits since start: lets tests and operators see where answers came from. */
  readonly stats = { renders: 0, cacheHits: 0 };
  private readonly inflight = new Map<string, Promise<{ data: Buffer; format: OutputFormat }>>();
  /**
   * Variants rendered and answered but still being written to the cache (written behind the answer, so
   * the client does not wait for the disk), served from here meanwhile. Keyed like `inflight`.
   */
  private readonly writing = new Map<
    string,
    { sourceKey: string; data: Buffer; format: OutputFormat; done: Promise<void> }
  >();

  constructor(
    private readonly config: Pick<
      Config,
      | 'IMAGE_MAX_PIXELS'
      | 'IMAGE_CONCURRENCY'
      | 'IMAGE_QUEUE_LIMIT'
      | 'IMAGE_TIMEOUT'
      | 'IMAGE_MAX_SOURCE_SIZE'
      | 'IMAGE_CACHE_DIR'
      | 'IMAGE_CACHE_MAX_SIZE'
    >,
    private readonly log?: FastifyBaseLogger,
  ) {
    this.queue = new TransformQueue(config.IMAGE_CONCURRENCY, config.IMAGE_QUEUE_LIMIT);
    this.cache = new VariantCache(config.IMAGE_CACHE_DIR, config.IMAGE_CACHE_MAX_SIZE);
  }

  /**
   * The variant for this source and request. The ETag is computed from the source ETag and the
   * normalised parameters before anything is read, so a conditional request that matches costs no
   * read and no render.
   */
  async transform(source: ImageSource, req: TransformRequest): Promise<TransformOutcome> {
    const { choice, vary } = chooseFormat(req.params.format, req.accept);
    const variantId = createHash('sha256')
      .update(`${PIPELINE_VERSION}\n${normalisedKey(req.params, choice)}`)
      .digest('hex')
      .slice(0, 32);
    const etag = `"${createHash('sha256').update(`${source.etag}\n${variantId}`).digest('hex').slice(0, 32)}"`;
    if (notModified(req, etag, source.lastModified)) return { status: 304, etag, vary };

    // Identical requests arriving together share one render.
    const flightKey = `${source.key}\n${source.etag}\n${variantId}`;
    const written = this.writing.get(flightKey);
    const cached =
      written ??
      (await this.cache.get(source.key, source.etag, variantId).catch((err: unknown) => {
        this.log?.warn({ err }, 'image cache read failed');
        return undefined;
      }));
    if (cached && cached.format in CONTENT_TYPES) {
      this.stats.cacheHits++;
      const format = cached.format as OutputFormat;
      return {
        status: 200,
        etag,
        vary,
        data: cached.data,
        contentType: CONTENT_TYPES[format],
        format,
        fromCache: true,
      };
    }

    let render = this.inflight.get(flightKey);
    if (!render) {
      render = this.render(source, req.params, choice, variantId, flightKey).finally(() =>
        this.inflight.delete(flightKey),
      );
      this.inflight.set(flightKey, render);
    }
    const { data, format } = await render;
    return { status: 200, etag, vary, data, contentType: CONTENT_TYPES[format], format, fromCache: false };
  }

  private async render(
    source: ImageSource,
    params: ImageParams,
    choice: ReturnType<typeof chooseFormat>['choice'],
    variantId: string,
    flightKey: string,
  ): Promise<{ data: Buffer; format: OutputFormat }> {
    const max = this.config.IMAGE_MAX_SOURCE_SIZE;
    if (source.size > max)
      throw new AppError(
        'IMAGE_TOO_LARGE',
        `The file is ${source.size} bytes; files of more than ${max} bytes are not transformed.`,
      );
    let opened = '';
    const out = await this.queue.run(async () => {
      // Read inside the queue, so requests waiting for a turn hold no image in memory.
      const { body, etag } = await source.open();
      opened = etag;
      const input = await readAll(body, max);
      this.stats.renders++;
      return renderImage(input, params, choice, {
        maxPixels: this.config.IMAGE_MAX_PIXELS,
        timeoutSeconds: this.config.IMAGE_TIMEOUT,
      });
    });
    // Overwritten between the rules' look and the read: these bytes do not belong to source.etag.
    if (opened !== source.etag) return { data: out.data, format: out.format };
    // Written behind the answer: the disk write (folders, temporary file, rename) took a few
    // milliseconds of every first render's latency.
    const done = this.cache
      .put(source.key, source.etag, variantId, { data: out.data, format: out.format })
      .catch((err: unknown) => {
        this.log?.warn({ err }, 'image cache write failed');
      })
      .finally(() => {
        if (this.writing.get(flightKey)?.done === done) this.writing.delete(flightKey);
      });
    this.writing.set(flightKey, { sourceKey: source.key, data: out.data, format: out.format, done });
    return { data: out.data, format: out.format };
  }

  /** Resolves when every variant written behind an answer is on disk (tests, shutdown). */
  async flush(): Promise<void> {
    await Promise.all([...this.writing.values()].map((w) => w.done));
  }

  /** Forgets the variants of a source that was deleted or overwritten. Never throws. */
  async forget(sourceKey: string): Promise<void> {
    // Variants still being written go first, so that none lands on disk after the folder is dropped.
    const pending: Promise<void>[] = [];
    for (const [key, w] of this.writing) {
      if (w.sourceKey !== sourceKey) continue;
      this.writing.delete(key);
      pending.push(w.done);
    }
    await Promise.all(pending);
    await this.cache.dropSource(sourceKey).catch((err: unknown) => {
      this.log?.warn({ err }, 'image cache cleanup failed');
    });
  }
}
