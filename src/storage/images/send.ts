/**
 * The HTTP side of a transform on `GET /storage/o/<file>`: the route settles access exactly as for the
 * plain download, then hands the source here instead of sending its bytes.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ObjectInfo } from '../backends/object-store.ts';
import { type ImageParams, isTransformRequest, parseImageParams } from './params.ts';
import type { ImageService } from './service.ts';

/** The transform a request asks for, or undefined for a plain download. Throws 400 on a bad value. */
export function imageParamsOf(query: unknown): ImageParams | undefined {
  const q = (query ?? {}) as Record<string, unknown>;
  return isTransformRequest(q) ? parseImageParams(q) : undefined;
}

export interface ImageReplyOptions {
  /** The source object, already allowed by the rules. */
  info: ObjectInfo;
  params: ImageParams;
  /** The Cache-Control the plain download of this file would carry (public or private by the rules). */
  cacheControl: string;
  /** `Content-Disposition` for a given file name. */
  disposition(filename: string): string;
  /** The source bytes, with the ETag of what was opened. */
  open(): Promise<{ body: Readable; etag: string }>;
}

const EXTENSIONS: Record<string, string> = {
  jpeg: 'jpg',
  png: 'png',
  webp: 'webp',
  avif: 'avif',
  gif: 'gif',
};

/** Sends the variant (200), or 304 when the client's validator still matches. */
export async function sendImage(
  images: ImageService,
  request: FastifyRequest,
  reply: FastifyReply,
  opts: ImageReplyOptions,
): Promise<FastifyReply> {
  const { info } = opts;
  const headers = request.headers;
  const outcome = await images.transform(
    { key: info.key, etag: info.etag, size: info.size, lastModified: info.lastModified, open: opts.open },
    {
      params: opts.params,
      accept: headers.accept,
      ifNoneMatch: headers['if-none-match'],
      ifModifiedSince: headers['if-modified-since'],
    },
  );
  reply.headers({
    etag: outcome.etag,
    'last-modified': info.lastModified.toUTCString(),
    'cache-control': opts.cacheControl,
    'x-content-type-options': 'nosniff',
  });
  if (outcome.vary) reply.header('vary', 'Accept');
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
    .header('content-disposition', opts.disposition(`${base}.${EXTENSIONS[outcome.format]}`));
  return reply.send(request.method === 'HEAD' ? undefined : outcome.data);
}
