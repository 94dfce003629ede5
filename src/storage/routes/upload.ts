/**
 * POST /storage/o/<file>: upload. The file comes as the multipart part `file` (HBP's encoding) or as the
 * raw body with its Content-Type; either way it streams into the store and is never held in memory.
 */

import { PassThrough } from 'node:stream';
import multipart from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../errors.ts';
import { type IncomingFile, toMetadata, uploadFile } from '../service.ts';
import {
  callerOf,
  FileMetadataSchema,
  KeyParams,
  keyOf,
  type StorageRouteDeps,
  security,
  TokenQuery,
} from './common.ts';

const schema = {
  summary: 'Upload a file (multipart part "file", or the raw body)',
  description:
    'Creates or overwrites the file. An overwrite keeps the file token. Rules: `create`/`write` for a new file, `update`/`write` for an existing one.',
  tags: ['storage'],
  security,
  params: KeyParams,
  querystring: TokenQuery,
  response: { 200: FileMetadataSchema, ...errorResponses(400, 401, 403, 404, 413, 503) },
};

/** Errors busboy raises for a body it cannot parse (they reach us on the part stream or the parser). */
const BUSBOY_ERROR = /^(Unexpected end of multipart data|Multipart: |Part terminated early|Malformed)/;

/** A multipart body the parser cannot read (no boundary, cut short) is the client's error: 400. */
function malformed(err: unknown): AppError {
  return new AppError(
    'BAD_REQUEST',
    `The multipart body is malformed: ${(err as Error)?.message ?? 'unreadable'}.`,
    {
      cause: err,
    },
  );
}

/** The file part of a multipart body; fails on a missing part and, after the bytes, on a second file. */
async function multipartFile(request: FastifyRequest): Promise<IncomingFile> {
  let parts: AsyncIterator<Awaited<ReturnType<FastifyRequest['file']>> & object>;
  try {
    parts = request.parts()[Symbol.asyncIterator]() as typeof parts;
  } catch (err) {
    throw malformed(err);
  }
  for (;;) {
    const r = await parts.next().catch((err: unknown) => {
      throw err instanceof AppError ? err : malformed(err);
    });
    if (r.done) throw new AppError('FILE_MISSING');
    const part = r.value;
    if (part.type !== 'file') continue;
    if (part.fieldname !== 'file') {
      part.file.resume();
      throw new AppError(
        'TOO_MANY_FILES',
        `Unexpected file part "${part.fieldname}": send one file part named "file".`,
      );
    }
    return {
      stream: part.file,
      filename: part.filename,
      mimetype: part.mimetype,
      async afterEnd() {
        for (;;) {
          const next = await parts.next().catch((err: unknown) => {
            throw err instanceof AppError ? err : malformed(err);
          });
          if (next.done) return;
          if (next.value.type === 'file') {
            next.value.file.resume();
            throw new AppError('TOO_MANY_FILES');
          }
        }
      },
    };
  }
}

/**
 * The raw body, decoupled from the socket so that refusing it midway can still answer (then close).
 * `release` ends the link once the upload is over (stored or refused): a connection that closes after
 * that is nobody's error, and an error raised on a stream no one reads any more would be uncaught (and
 * end the process).
 */
function rawFile(request: FastifyRequest): { file: IncomingFile; release(): void } {
  const raw = request.raw;
  const stream = new PassThrough();
  const aborted = () => {
    // A client error (400), never seen by the client that left, and not logged as a fault of ours.
    if (!raw.complete)
      stream.destroy(
        new AppError('BAD_REQUEST', 'The client closed the connection before the upload finished.'),
      );
  };
  raw.once('close', aborted);
  raw.once('error', aborted);
  // The reader (the store's write) learns of an error from the stream itself; this listener only keeps
  // one raised while nobody reads (the client leaves while the upload looks up the file, before the
  // write begins) from being an uncaught exception, which would end the process.
  stream.on('error', () => {});
  raw.pipe(stream);
  const length = request.headers['content-length'];
  return {
    file: {
      stream,
      mimetype: request.headers['content-type'],
      declaredSize: length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined,
    },
    release() {
      raw.off('close', aborted);
      raw.off('error', aborted);
      raw.unpipe(stream);
      stream.destroy();
    },
  };
}

export const uploadRoute: FastifyPluginAsyncTypebox<{ deps: StorageRouteDeps }> = async (app, { deps }) => {
  // This scope reads bodies itself: multipart through busboy, anything else as a stream.
  app.removeAllContentTypeParsers();
  await app.register(multipart, {
    limits: { fileSize: deps.config.STORAGE_MAX_UPLOAD_SIZE + 1, files: 10, fields: 100, parts: 110 },
    throwFileSizeLimit: false,
  });
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // A refusal before the whole body arrived (403, 413, a bad key) closes the connection after answering,
  // so the client stops sending instead of the server reading, say, a gigabyte into the void.
  app.addHook('onSend', async (request, reply) => {
    if (reply.statusCode >= 400 && !request.raw.complete) reply.header('connection', 'close');
  });

  app.post('/o/*', { schema }, async (request, reply) => {
    const key = keyOf(request);
    const caller = await callerOf(request, request.query, deps.config);
    const h = request.headers;
    if (!h['content-type'] && !h['transfer-encoding'] && (h['content-length'] ?? '0') === '0') {
      // A POST with no body and no type is a client mistake (a forgotten file), not an empty file.
      throw new AppError(
        'FILE_MISSING',
        'Send the file as the multipart part "file", or as the raw body with its Content-Type.',
      );
    }
    const raw = request.isMultipart() ? undefined : rawFile(request);
    const file = raw?.file ?? (await multipartFile(request));
    // The parser reports a body cut short as an error on the file stream; that is a 400, not a 500.
    let streamError: unknown;
    if (request.isMultipart()) file.stream.once('error', (err) => (streamError = err));
    const info = await uploadFile(deps, key, caller, file)
      .catch((err: unknown) => {
        // Our own refusals (413, 403) also reach the part stream, as the reason it was stopped.
        const fromParser =
          !(err instanceof AppError) &&
          (err === streamError || (err instanceof Error && BUSBOY_ERROR.test(err.message)));
        throw request.isMultipart() && fromParser ? malformed(err) : err;
      })
      .finally(() => raw?.release());
    await deps.images.forget(key.key);
    return reply.code(200).send(toMetadata(info));
  });
};
