/**
 * The image service behind `GET /storage/o/<file>?w=…`: turns a source object (already authorised by
 * the storage rules) and the transform parameters into a variant, answering from the variant ETag
 * (304), the local cache, the memory of failed renders, or a render — in that order.
 *
 * Renders run in child processes (pool.ts), in two lanes, each with its own bounded queue: raster
 * images, whose cost the pixel limits bound, and SVG (when IMAGE_SVG_ENABLED), whose cost no header
 * tells, at the lowest CPU priority and IMAGE_SVG_CONCURRENCY at a time, so that slow drawings never
 * make a thumbnail wait. Only renders count against the caller's transform rate limit (`admit`).
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { VariantCache } from './cache.ts';
import { FailureMemory } from './failures.ts';
import { CONTENT_TYPES, type OutputFormat } from './formats.ts';
import { chooseFormat, type ImageParams, normalisedKey } from './params.ts';
import type { RenderLimits, SvgMode } from './pipeline.ts';
import { RenderPool } from './pool.ts';
import { TransformQueue } from './queue.ts';

let pipelineVersion: Promise<string> | undefined;
/**
 * Changes whenever the same parameters could give different bytes (pipeline or sharp upgrade). sharp is
 * loaded for it with the first transform (~0.25 s of CPU), not at start: renders run in other processes.
 */
function pipelineVersionOnce(): Promise<string> {
  pipelineVersion ??= import('sharp').then(
    ({ default: sharp }) => `2/${sharp.versions.sharp}/${sharp.versions.vips}`,
  );
  return pipelineVersion;
}

/** The object to transform, as the storage route found it after the rules allowed the read. */
export interface ImageSource {
  key: string;
  /** The object's ETag, quoted as the store gives it. */
  etag: string;
  size: number;
  /** The stored media type: an SVG goes straight to the SVG lane. */
  contentType?: string;
  /** When the object was last written; lets If-Modified-Since answer 304 too. */
  lastModified?: Date;
  /**
   * Opens the object's bytes, with the ETag of what was opened; called only when a render is needed.
   * Throw an AppError (404) if the object has gone since the rules saw it.
   */
  open(): Promise<{ body: Readable | Buffer; etag: string }>;
  /**
   * The file holding exactly the bytes `etag` names, when the store keeps them in one (fs): the render
   * process opens it read-only itself, so the bytes are neither read here nor sent. A path the store
   * made from its own metadata, never from the request.
   */
  file?(): string | undefined;
}

export interface TransformRequest {
  params: ImageParams;
  accept?: string | undefined;
  ifNoneMatch?: string | undefined;
  ifModifiedSince?: string | undefined;
  /**
   * Called once before a render starts (not for a cache hit, a remembered failure or a render already
   * under way for the same variant); throws to refuse it (the caller's rate limit).
   */
  admit?: (() => Promise<void>) | undefined;
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

/** True for the stored type of an SVG file. */
export function isSvgType(contentType: string | undefined): boolean {
  return /^image\/svg\+xml\s*(;|$)/i.test(contentType ?? '');
}

/**
 * Nice values added to the service's own. A raster render is the work its request waits for: a lower
 * priority would only make it lose to unrelated processes on a busy machine (measured: 4.7× slower than
 * sharp called directly at nice 10), while being a process of its own already keeps it from delaying the
 * service's event loop. A drawing may take until IMAGE_TIMEOUT: it gets the CPU nobody else wants.
 */
const RASTER_NICENESS = 0;
const SVG_NICENESS = 19;

interface Lane {
  queue: TransformQueue;
  pool: RenderPool;
}

type ImageConfig = Pick<
  Config,
  | 'IMAGE_MAX_PIXELS'
  | 'IMAGE_MAX_OUTPUT_PIXELS'
  | 'IMAGE_ALLOW_ENLARGEMENT'
  | 'IMAGE_SVG_ENABLED'
  | 'IMAGE_SVG_CONCURRENCY'
  | 'IMAGE_CONCURRENCY'
  | 'IMAGE_QUEUE_LIMIT'
  | 'IMAGE_TIMEOUT'
  | 'IMAGE_FAILURE_TTL'
  | 'IMAGE_MAX_SOURCE_SIZE'
  | 'IMAGE_CACHE_DIR'
  | 'IMAGE_CACHE_MAX_SIZE'
>;

export class ImageService {
  readonly lanes: { raster: Lane; svg: Lane };
  readonly cache: VariantCache;
  readonly failures: FailureMemory;
  /**
   * Renders started, cache hits, and failures answered from memory since start: lets tests and
   * operators see where answers came from.
   */
  readonly stats = { renders: 0, cacheHits: 0, failureHits: 0 };
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
    private readonly config: ImageConfig,
    private readonly log?: FastifyBaseLogger,
  ) {
    const timeoutMs = config.IMAGE_TIMEOUT * 1000;
    this.lanes = {
      raster: {
        queue: new TransformQueue(config.IMAGE_CONCURRENCY, config.IMAGE_QUEUE_LIMIT),
        pool: new RenderPool({
          niceness: RASTER_NICENESS,
          timeoutMs,
          maxIdle: config.IMAGE_CONCURRENCY,
          log,
        }),
      },
      svg: {
        queue: new TransformQueue(config.IMAGE_SVG_CONCURRENCY, config.IMAGE_QUEUE_LIMIT),
        pool: new RenderPool({
          niceness: SVG_NICENESS,
          timeoutMs,
          maxIdle: config.IMAGE_SVG_CONCURRENCY,
          log,
        }),
      },
    };
    this.cache = new VariantCache(config.IMAGE_CACHE_DIR, config.IMAGE_CACHE_MAX_SIZE);
    this.failures = new FailureMemory(config.IMAGE_FAILURE_TTL * 1000);
  }

  /** Transforms running and waiting, both lanes together (metrics). */
  get queue(): { readonly stats: { running: number; waiting: number } } {
    const { raster, svg } = this.lanes;
    return {
      stats: {
        running: raster.queue.stats.running + svg.queue.stats.running,
        waiting: raster.queue.stats.waiting + svg.queue.stats.waiting,
      },
    };
  }

  /** Renders stopped by IMAGE_TIMEOUT since start, both lanes together. */
  get timeouts(): number {
    return this.lanes.raster.pool.stats.timeouts + this.lanes.svg.pool.stats.timeouts;
  }

  /** Stops the render processes (shutdown). */
  async close(): Promise<void> {
    await Promise.all([this.lanes.raster.pool.close(), this.lanes.svg.pool.close()]);
  }

  /**
   * The variant for this source and request. The ETag is computed from the source ETag and the
   * normalised parameters before anything is read, so a conditional request that matches costs no
   * read and no render.
   */
  async transform(source: ImageSource, req: TransformRequest): Promise<TransformOutcome> {
    const { choice, vary } = chooseFormat(req.params.format, req.accept);
    const variantId = createHash('sha256')
      .update(`${await pipelineVersionOnce()}\n${normalisedKey(req.params, choice)}`)
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
      const failed = this.failures.recall(flightKey);
      if (failed) {
        this.stats.failureHits++;
        throw failed;
      }
      await req.admit?.();
      // Joined while admit was waiting on the rate-limit store: share that render instead.
      render = this.inflight.get(flightKey);
    }
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
    const svgOn = this.config.IMAGE_SVG_ENABLED;
    const inLane = (lane: Lane, svg: SvgMode) =>
      lane.queue.run(async () => {
        const limits = this.limits(svg);
        const file = source.file?.();
        if (file) {
          opened = source.etag;
          this.stats.renders++;
          const out = await lane.pool.run({
            file: { path: file, size: source.size },
            params,
            choice,
            limits,
          });
          if (out !== 'gone') return out;
          // Overwritten or deleted since the rules saw it: read what is there now, as below.
        }
        // Read inside the queue, so requests waiting for a turn hold no image in memory.
        const { body, etag } = await source.open();
        opened = etag;
        const input = await readAll(body, max);
        if (!file) this.stats.renders++;
        return lane.pool.run({ input, params, choice, limits });
      });
    let out: Awaited<ReturnType<typeof inLane>>;
    try {
      if (svgOn && isSvgType(source.contentType)) out = await inLane(this.lanes.svg, 'render');
      else {
        out = await inLane(this.lanes.raster, svgOn ? 'reroute' : 'refuse');
        // Not a raster image under a raster type: drawn in the SVG lane, like any SVG.
        if (out === 'reroute') out = await inLane(this.lanes.svg, 'render');
      }
      if (out === 'reroute' || out === 'gone') throw new AppError('NOT_AN_IMAGE');
    } catch (err) {
      // Only a failure of the very bytes the ETag names says anything about the next request.
      if (opened === source.etag) this.failures.remember(flightKey, err);
      throw err;
    }
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

  private limits(svg: SvgMode): RenderLimits {
    const c = this.config;
    return {
      maxPixels: c.IMAGE_MAX_PIXELS,
      maxOutputPixels: c.IMAGE_MAX_OUTPUT_PIXELS,
      allowEnlargement: c.IMAGE_ALLOW_ENLARGEMENT,
      timeoutSeconds: c.IMAGE_TIMEOUT,
      svg,
    };
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
    this.failures.forget(`${sourceKey}\n`);
    await this.cache.dropSource(sourceKey).catch((err: unknown) => {
      this.log?.warn({ err }, 'image cache cleanup failed');
    });
  }
}
