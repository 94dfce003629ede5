/**
 * The incoming-file adapter of the upload route: turns a request into an IncomingFile (upload.ts), from
 * the multipart part `file` (HBP's encoding) or the raw body with its Content-Type, streamed, never held
 * in memory. Whatever the parser or the socket reports goes onto the file's stream as a 400 AppError, so
 * the upload tells a client's fault from its own by the error's type, never by its message.
 */
import { finished, PassThrough, type Readable } from 'node:stream';
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import type { IncomingFile } from '../upload.ts';

/**
 * Makes the scope `app` read request bodies as incoming files: multipart through busboy (at most
 * `maxSize` + 1 bytes of a file, so that one byte past the limit shows), anything else as a stream.
 */
export async function readIncomingFiles(app: FastifyInstance, maxSize: number): Promise<void> {
  app.removeAllContentTypeParsers();
  await app.register(multipart, {
    limits: { fileSize: maxSize + 1, files: 10, fields: 100, parts: 110 },
    throwFileSizeLimit: false,
  });
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // A refusal before the whole body arrived (403, 413, a bad key) closes the connection after answering,
  // so the client stops sending instead of the server reading, say, a gigabyte into the void.
  app.addHook('onSend', async (request, reply) => {
    if (reply.statusCode >= 400 && !request.raw.complete) reply.header('connection', 'close');
  });
}

/** An incoming file and, to call once the upload is over (stored or refused), its release. */
export interface Incoming {
  file: IncomingFile;
  release(): void;
}

/** The request's file: its multipart part `file`, or its raw body. 400 when it has none. */
export async function incomingFile(request: FastifyRequest): Promise<Incoming> {
  const h = request.headers;
  if (!h['content-type'] && !h['transfer-encoding'] && (h['content-length'] ?? '0') === '0') {
    // A POST with no body and no type is a client mistake (a forgotten file), not an empty file.
    throw new AppError(
      'FILE_MISSING',
      'Send the file as the multipart part "file", or as the raw body with its Content-Type.',
    );
  }
  if (!request.isMultipart()) return rawFile(request);
  return { file: await multipartFile(request), release() {} };
}

/** A multipart body the parser cannot read (no boundary, cut short) is the client's error: 400. */
function malformed(err: unknown): AppError {
  if (err instanceof AppError) return err;
  return new AppError(
    'BAD_REQUEST',
    `The multipart body is malformed: ${(err as Error)?.message ?? 'unreadable'}.`,
    { cause: err },
  );
}

/**
 * The parser's stream of one file part, relayed so that a failure the parser gives it (a part cut short,
 * a request closed midway) reaches the reader as malformed (400). `finished` also reports a failure that
 * came before this point: with the whole body at hand the parser may have failed the part already. The
 * relay is destroyed by the upload when it stops reading (a refusal); that stops the part, which stops
 * the parser.
 */
function fromParser(part: Readable): Readable {
  const relay = new PassThrough();
  finished(part, (err) => {
    if (err) relay.destroy(malformed(err));
  });
  relay.on('close', () => {
    if (!part.readableEnded) part.destroy();
  });
  // Keeps an error raised while nobody reads yet (the upload is looking up the file) from being an
  // uncaught exception, which would end the process; the reader learns of it from the stream itself.
  relay.on('error', () => {});
  part.pipe(relay);
  return relay;
}

/** The file part of a multipart body; fails on a missing part and, after the bytes, on a second file. */
async function multipartFile(request: FastifyRequest): Promise<IncomingFile> {
  let parts: AsyncIterator<Awaited<ReturnType<FastifyRequest['file']>> & object>;
  try {
    parts = request.parts()[Symbol.asyncIterator]() as typeof parts;
  } catch (err) {
    throw malformed(err);
  }
  // Whatever the parts iterator rejects with comes from the parser (or its limits): the body's fault.
  const next = () => parts.next().catch((err: unknown) => Promise.reject(malformed(err)));
  for (;;) {
    const r = await next();
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
    const length = request.headers['content-length'];
    return {
      stream: fromParser(part.file),
      filename: part.filename,
      mimetype: part.mimetype,
      // The whole body's length bounds the file's: what the quota reserves for it.
      sizeBound: length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined,
      async checkRest() {
        for (;;) {
          const rest = await next();
          if (rest.done) return;
          if (rest.value.type === 'file') {
            rest.value.file.resume();
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
function rawFile(request: FastifyRequest): Incoming {
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
