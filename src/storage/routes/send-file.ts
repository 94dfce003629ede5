/**
 * Sends a file: validators, conditional requests (304), one byte range (206/416), caching by the rules,
 * and presentation by type (inline only for types a browser shows without running them). The headers
 * always describe the bytes sent: a plain GET opens the file first and takes its headers from what was
 * opened; otherwise the bytes are opened as the version the headers were computed from, and a file
 * overwritten in between is resolved again.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { ObjectChanged } from '../backends/object-store.ts';
import {
  contentDisposition,
  ifRangeMatches,
  isInline,
  isNotModified,
  parseRange,
  type RangeResult,
} from '../http-file.ts';
import { type FileSource, openFile, type ReadableFile, type StorageDeps } from '../service.ts';

/** Metadata-then-bytes attempts before a file that keeps changing is answered with 503. */
const ATTEMPTS = 3;

type Answer = { kind: 'not-modified' } | RangeResult;

function answerFor(headers: Record<string, string | undefined>, file: ReadableFile): Answer {
  if (isNotModified(headers, file.info)) return { kind: 'not-modified' };
  return ifRangeMatches(headers['if-range'], file.info)
    ? parseRange(headers.range, file.info.size)
    : { kind: 'full' };
}

export async function sendFile(
  deps: StorageDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  source: FileSource,
): Promise<FastifyReply> {
  const headers = request.headers as Record<string, string | undefined>;
  let file: ReadableFile;
  let answer: Answer;
  let body: Readable | undefined;
  if (
    request.method === 'GET' &&
    !headers.range &&
    !headers['if-none-match'] &&
    !headers['if-modified-since']
  ) {
    // Nothing depends on the metadata before the bytes: open first (one store read, not two).
    ({ file, body } = await source.openWhole());
    answer = { kind: 'full' };
  } else {
    for (let attempt = 1; ; attempt++) {
      file = await source.resolve();
      answer = answerFor(headers, file);
      if (request.method === 'HEAD' || answer.kind === 'not-modified' || answer.kind === 'unsatisfiable')
        break;
      try {
        body = await openFile(deps, file.info, answer.kind === 'partial' ? answer : undefined);
        break;
      } catch (err) {
        if (!(err instanceof ObjectChanged)) throw err;
        if (attempt >= ATTEMPTS)
          throw new AppError('STORAGE_UNAVAILABLE', 'The file changed while it was being read; try again.', {
            cause: err,
          });
      }
    }
  }

  if (body && source.beforeBytes) {
    try {
      await source.beforeBytes();
    } catch (err) {
      body.destroy();
      throw err;
    }
  }

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
  if (answer.kind === 'not-modified') return reply.code(304).send();
  if (answer.kind === 'unsatisfiable') {
    throw new AppError('RANGE_NOT_SATISFIABLE', undefined, {
      headers: { 'content-range': `bytes */${info.size}` },
    });
  }
  reply.type(info.contentType);
  if (answer.kind === 'partial') {
    reply.code(206).header('content-range', `bytes ${answer.start}-${answer.end}/${info.size}`);
    reply.header('content-length', answer.end - answer.start + 1);
  } else {
    reply.code(200).header('content-length', info.size);
  }
  if (!body) return reply.send();
  return reply.send(body);
}
