/**
 * Sends a resolved file: validators, conditional requests (304), one byte range (206/416), caching by
 * the rules, and presentation by type (inline only for types a browser shows without running them).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { contentDisposition, ifRangeMatches, isInline, isNotModified, parseRange } from '../http-file.ts';
import { openFile, type ReadableFile, type StorageDeps } from '../service.ts';

export async function sendFile(
  deps: StorageDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  file: ReadableFile,
): Promise<FastifyReply> {
  const { info } = file;
  const name = info.key.slice(info.key.lastIndexOf('/') + 1);
  const inline = isInline(info.contentType);
  reply.headers({
    etag: info.etag,
    'last-modified': info.lastModified.toUTCString(),
    'accept-ranges': 'bytes',
    'cache-control': file.public
      ? `public, max-age=${deps.config.STORAGE_PUBLIC_MAX_AGE}`
      : 'private, no-cache',
    'content-disposition': contentDisposition(inline ? 'inline' : 'attachment', name),
    'x-content-type-options': 'nosniff',
  });
  if (inline) {
    // Safe types may be embedded by the app (HBP dropped X-Frame-Options on storage GETs as well); active
    // ones keep the service-wide `sandbox` CSP and frame ban on top of being downloads.
    reply.removeHeader('x-frame-options');
    reply.removeHeader('content-security-policy');
  }
  const headers = request.headers as Record<string, string | undefined>;
  if (isNotModified(headers, info)) return reply.code(304).send();

  const range = ifRangeMatches(headers['if-range'], info)
    ? parseRange(headers.range, info.size)
    : { kind: 'full' as const };
  if (range.kind === 'unsatisfiable') {
    throw new AppError('RANGE_NOT_SATISFIABLE', undefined, {
      headers: { 'content-range': `bytes */${info.size}` },
    });
  }
  reply.type(info.contentType);
  if (range.kind === 'partial') {
    reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${info.size}`);
    reply.header('content-length', range.end - range.start + 1);
  } else {
    reply.code(200).header('content-length', info.size);
  }
  if (request.method === 'HEAD') return reply.send();
  const body = await openFile(deps, info, range.kind === 'partial' ? range : undefined);
  return reply.send(body);
}
