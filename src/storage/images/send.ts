/**
 * The HTTP side of a transform on `GET /storage/o/<file>`: the route settles access exactly as for the
 * plain download, then hands the source here instead of sending its bytes.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { contentDisposition } from '../http-file.ts';
import { type ReadableFile, type StorageDeps, store } from '../service.ts';
import { type ImageParams, isTransformRequest, parseImageParams } from './params.ts';
import { type ImageService, isSvgType } from './service.ts';

/**
 * Whether a file of this stored type is rasterised. An SVG is not unless IMAGE_SVG_ENABLED: its
 * transform answers the stored file as the plain download does (as an attachment, never run inline),
 * the way image CDNs pass SVG through, so `<img src="…svg?w=64">` keeps working.
 */
export function transformsType(config: { IMAGE_SVG_ENABLED: boolean }, contentType: string): boolean {
  return config.IMAGE_SVG_ENABLED || !isSvgType(contentType);
}

/** The transform a request asks for, or undefined for a plain download. Throws 400 on a bad value. */
export function imageParamsOf(query: unknown): ImageParams | undefined {
  const q = (query ?? {}) as Record<string, unknown>;
  return isTransformRequest(q) ? parseImageParams(q) : undefined;
}

const EXTENSIONS: Record<string, string> = {
  jpeg: 'jpg',
  png: 'png',
  webp: 'webp',
  avif: 'avif',
  gif: 'gif',
};

/**
 * Sends the variant (200), or 304 when the client's validator still matches. Caching headers follow
 * the plain download of the same file (public or private by the rules).
 */
export async function sendImage(
  images: ImageService,
  deps: StorageDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  file: ReadableFile,
  params: ImageParams,
  /** Called before a variant's bytes are sent (a share link counts its download): FileSource.beforeBytes. */
  beforeBytes?: () => Promise<void>,
): Promise<FastifyReply> {
  const { info } = file;
  const headers = request.headers;
  const outcome = await images.transform(
    {
      key: info.key,
      etag: info.etag,
      size: info.size,
      contentType: info.contentType,
      lastModified: info.lastModified,
      file: deps.objects.dataFile && (() => deps.objects.dataFile?.(info.key, info)),
      async open() {
        const got = await store(() => deps.objects.get(info.key));
        if (!got) throw new AppError('NOT_FOUND');
        return { body: got.body, etag: got.info.etag };
      },
    },
    {
      params,
      accept: headers.accept,
      ifNoneMatch: headers['if-none-match'],
      ifModifiedSince: headers['if-modified-since'],
      // Renders have their own limit per client: a cached variant costs next to nothing, a render
      // up to IMAGE_TIMEOUT of a render process.
      admit: () =>
        request.server.limiter.consume(
          `transform:${request.ip}`,
          deps.config.RATE_LIMIT_TRANSFORM_MAX,
          deps.config.RATE_LIMIT_TRANSFORM_WINDOW,
        ),
    },
  );
  if (outcome.status !== 304 && request.method !== 'HEAD') await beforeBytes?.();
  reply.headers({
    etag: outcome.etag,
    'last-modified': info.lastModified.toUTCString(),
    'cache-control': file.public
      ? `public, max-age=${deps.config.STORAGE_PUBLIC_MAX_AGE}`
      : 'private, no-cache',
    'x-content-type-options': 'nosniff',
    // A variant is rendered whole; a Range header is ignored (RFC 9110 allows that) and said so here.
    'accept-ranges': 'none',
  });
  if (outcome.vary) {
    // Added to what is there (CORS already varies on Origin).
    const vary = reply.getHeader('vary');
    reply.header('vary', vary ? `${String(vary)}, Accept` : 'Accept');
  }
  // The output is always a raster image, which the browser shows without running anything.
  reply.removeHeader('x-frame-options');
  reply.removeHeader('content-security-policy');
  if (outcome.status === 304) return reply.code(304).send();
  const name = info.key.slice(info.key.lastIndexOf('/') + 1);
  const base = name.includes('.') ? name.slice(0, name.lastIndexOf('.')) : name;
  reply
    .code(200)
    .type(outcome.contentType)
    .header('content-length', outcome.data.length)
    .header('content-disposition', contentDisposition('inline', `${base}.${EXTENSIONS[outcome.format]}`));
  return reply.send(request.method === 'HEAD' ? undefined : outcome.data);
}
