/**
 * /storage/uploads: resumable uploads (TUS 1.0.0, tus/service.ts). Each route resolves the caller as the
 * plain upload does, checks what Gatehouse decides (version, the declared upload, ownership, the
 * checksum), then hands the request to @tus/server as a web Request and sends its answer back through
 * Fastify, so logging, error bodies and hooks stay the app's. The body is never parsed: it streams from
 * the socket into the upload's segments.
 */
import { createHash } from 'node:crypto';
import { PassThrough, Readable, Transform } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { Metadata } from '@tus/utils';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { StoreUnavailable } from '../backends/object-store.ts';
import type { Caller } from '../service.ts';
import { callers, type Declared, failures, pendingIds, type TusUploads } from '../tus/service.ts';
import { callerOf, type StorageRouteDeps } from './common.ts';

const TUS_VERSION = '1.0.0';
const OCTETS = 'application/offset+octet-stream';

export interface TusRouteDeps extends StorageRouteDeps {
  readonly tus: TusUploads;
}

function requireVersion(request: FastifyRequest): void {
  if (request.headers['tus-resumable'] !== TUS_VERSION)
    throw new AppError('TUS_VERSION_UNSUPPORTED', undefined, { headers: { 'tus-version': TUS_VERSION } });
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

function bad(message: string): AppError {
  return new AppError('BAD_REQUEST', message);
}

/** Upload-Length and Upload-Metadata of a creation. */
function declaredUpload(request: FastifyRequest): Declared {
  if (header(request, 'upload-concat') !== undefined)
    throw bad('Upload-Concat (the concatenation extension) is not supported.');
  const length = header(request, 'upload-length');
  if (length === undefined)
    throw bad(
      header(request, 'upload-defer-length') !== undefined
        ? 'Upload-Defer-Length is not supported: declare the size in Upload-Length.'
        : 'Upload-Length is required.',
    );
  if (!/^\d{1,16}$/.test(length) || !Number.isSafeInteger(Number(length)))
    throw bad('Upload-Length must be a whole number of bytes.');
  let metadata: Record<string, string | null> = {};
  const raw = header(request, 'upload-metadata');
  if (raw !== undefined && raw.trim() !== '') {
    try {
      metadata = Metadata.parse(raw) as Record<string, string | null>;
    } catch {
      throw bad('Upload-Metadata must be comma-separated "key base64value" pairs.');
    }
  }
  return { length: Number(length), metadata };
}

/** The SHA-1 digest an `Upload-Checksum` header announces; undefined without one. */
function announcedChecksum(request: FastifyRequest): Buffer | undefined {
  const raw = header(request, 'upload-checksum');
  if (raw === undefined) return undefined;
  const m = /^(\S+) ([A-Za-z0-9+/]+={0,2})$/.exec(raw.trim());
  if (!m) throw bad('Upload-Checksum must be "<algorithm> <base64 digest>".');
  if ((m[1] as string).toLowerCase() !== 'sha1')
    throw bad('Upload-Checksum: the only algorithm supported is sha1 (Tus-Checksum-Algorithm).');
  const digest = Buffer.from(m[2] as string, 'base64');
  if (digest.length !== 20) throw bad('Upload-Checksum: a sha1 digest is 20 bytes.');
  return digest;
}

/** What @tus/server answers, as the catalogue's errors. */
function fromTusStatus(status: number, text: string): AppError | Error {
  const said = text.trim();
  switch (status) {
    case 404:
    case 410:
      return new AppError('NOT_FOUND', 'No such upload (it may have expired).');
    case 409:
      return new AppError('UPLOAD_OFFSET_MISMATCH');
    case 412:
      return new AppError('TUS_VERSION_UNSUPPORTED', undefined, { headers: { 'tus-version': TUS_VERSION } });
    case 413:
      return new AppError('PAYLOAD_TOO_LARGE', `The upload is larger than it may be: ${said}`);
    case 460:
      return new AppError('UPLOAD_CHECKSUM_MISMATCH');
    default:
      if (status >= 400 && status < 500) return bad(`The TUS request is not valid: ${said}`);
      return new Error(`@tus/server answered ${status}: ${said}`);
  }
}

function fromFailure(err: Error): Error {
  if (err instanceof StoreUnavailable) return new AppError('STORAGE_UNAVAILABLE', undefined, { cause: err });
  return err;
}

interface HandOver {
  caller: Caller;
  /** The upload created for this request (POST). */
  id?: string;
  /** Whether the request carries upload bytes. */
  body?: boolean;
  tus: TusUploads;
}

/**
 * The request's body for @tus/server: the socket's bytes, ended (not failed) when the client leaves, so
 * what arrived is kept; with a checksum, hashed, and failed when the digest differs or the client left
 * early, so that nothing of it is kept.
 */
function bodyOf(request: FastifyRequest, checksum: Buffer | undefined, onMismatch: () => void): Readable {
  const raw = request.raw;
  const out: PassThrough | Transform = checksum
    ? (() => {
        const hash = createHash('sha1');
        return new Transform({
          transform(chunk: Buffer, _enc, cb) {
            hash.update(chunk);
            cb(null, chunk);
          },
          flush(cb) {
            if (hash.digest().equals(checksum)) return cb();
            onMismatch();
            cb(new AppError('UPLOAD_CHECKSUM_MISMATCH'));
          },
        });
      })()
    : new PassThrough();
  const left = () => {
    if (raw.complete) return;
    raw.unpipe(out);
    if (checksum) out.destroy(bad('The client closed the connection before the body ended.'));
    else out.end();
  };
  raw.once('close', left);
  raw.once('error', left);
  out.on('error', () => {});
  raw.pipe(out);
  return out;
}

async function handOver(request: FastifyRequest, reply: FastifyReply, h: HandOver): Promise<FastifyReply> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || name === 'connection' || name === 'transfer-encoding') continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const q = request.url.indexOf('?');
  const path = q === -1 ? request.url : request.url.slice(0, q);
  let mismatch = false;
  let release: (() => void) | undefined;
  let body: WebReadableStream | undefined;
  if (h.body) {
    const checksum = announcedChecksum(request);
    const id = h.id ?? path.slice(path.lastIndexOf('/') + 1);
    if (checksum) release = h.tus.checksumInProgress(id);
    body = Readable.toWeb(
      bodyOf(request, checksum, () => {
        mismatch = true;
      }),
    );
  }
  const req = new Request(`http://gatehouse.invalid${path}`, {
    method: request.method,
    headers,
    body: body as ReadableStream | undefined,
    duplex: 'half',
  } as RequestInit);
  if (h.id) pendingIds.set(req, h.id);
  callers.set(req, h.caller);
  let res: Response;
  try {
    res = await h.tus.server.handleWeb(req);
  } finally {
    release?.();
  }
  const text = await res.text();
  if (mismatch) throw new AppError('UPLOAD_CHECKSUM_MISMATCH');
  const failed = failures.get(req);
  if (failed) throw fromFailure(failed);
  if (res.status >= 400) throw fromTusStatus(res.status, text);
  reply.code(res.status);
  for (const [name, value] of res.headers) {
    if (name.startsWith('access-control-') || name === 'content-length' || name === 'connection') continue;
    reply.header(name, value);
  }
  if (request.method === 'OPTIONS') reply.header('tus-checksum-algorithm', 'sha1');
  return reply.send(res.status === 204 || request.method === 'HEAD' ? undefined : text);
}

const IdParams = {
  type: 'object',
  properties: { id: { type: 'string', maxLength: 64 } },
  required: ['id'],
} as const;

export const tusRoutes: FastifyPluginAsync<{ deps: TusRouteDeps }> = async (app, { deps }) => {
  const { tus, config } = deps;
  // The bytes stream from the socket into the upload: no parser reads them.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  app.addHook('onSend', async (request, reply) => {
    reply.header('tus-resumable', TUS_VERSION);
    // A refusal before the whole body arrived closes the connection, so the client stops sending.
    if (reply.statusCode >= 400 && !request.raw.complete) reply.header('connection', 'close');
  });

  const tags = ['storage'];
  const discovery = async (request: FastifyRequest, reply: FastifyReply) =>
    handOver(request, reply, { caller: await callerOf(request, {}, config), tus });
  app.options('/uploads', { schema: { summary: 'TUS discovery', tags } }, discovery);
  app.options('/uploads/:id', { schema: { summary: 'TUS discovery', tags, params: IdParams } }, discovery);

  app.post(
    '/uploads',
    {
      schema: {
        summary: 'Create a resumable upload (TUS creation, creation-with-upload)',
        description:
          "Upload-Metadata names the file (`path`) and its type (`contentType` or `filetype`); the rules' `write` is checked now, and again on the bytes at completion.",
        tags,
      },
    },
    async (request, reply) => {
      requireVersion(request);
      const caller = await callerOf(request, {}, config);
      const row = await tus.create(caller, declaredUpload(request));
      const contentType = header(request, 'content-type');
      try {
        return await handOver(request, reply, {
          caller,
          id: row.id,
          body: contentType === OCTETS,
          tus,
        });
      } catch (err) {
        await tus.forget(row.id);
        throw err;
      }
    },
  );

  app.route({
    method: 'HEAD',
    url: '/uploads/:id',
    schema: { summary: 'The offset of a resumable upload', tags, params: IdParams },
    handler: async (request, reply) => {
      requireVersion(request);
      const caller = await callerOf(request, {}, config);
      const row = await tus.owned((request.params as { id: string }).id, caller);
      await tus.completeIfDue(row, caller);
      return handOver(request, reply, { caller, tus });
    },
  });

  app.patch(
    '/uploads/:id',
    { schema: { summary: 'Append to a resumable upload', tags, params: IdParams } },
    async (request, reply) => {
      requireVersion(request);
      const caller = await callerOf(request, {}, config);
      await tus.owned((request.params as { id: string }).id, caller);
      if (header(request, 'content-type') !== OCTETS)
        throw new AppError('UNSUPPORTED_MEDIA_TYPE', `A PATCH body is sent as ${OCTETS}.`);
      const offset = header(request, 'upload-offset');
      if (offset === undefined || !/^\d{1,16}$/.test(offset))
        throw bad('Upload-Offset must be the whole number of bytes the upload holds.');
      return handOver(request, reply, { caller, body: true, tus });
    },
  );

  app.delete(
    '/uploads/:id',
    { schema: { summary: 'Terminate a resumable upload', tags, params: IdParams } },
    async (request, reply) => {
      requireVersion(request);
      const caller = await callerOf(request, {}, config);
      const row = await tus.owned((request.params as { id: string }).id, caller);
      if (row.completedAt) {
        // The file is in place and stays; only the record of its upload goes.
        await tus.forget(row.id);
        return reply.code(204).send();
      }
      return handOver(request, reply, { caller, tus });
    },
  );
};
