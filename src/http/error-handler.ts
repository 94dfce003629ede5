/**
 * Turns every failure into the one error body `{statusCode, error, message, code}`. AppErrors carry their
 * own status; framework errors (bad JSON, wrong content type, oversize body, schema failures) become 4xx
 * with a message; anything else is a 500 that shows no internals but carries the request id, and is logged.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DatabaseUnavailable, ForeignKeyViolation } from '../db/database.ts';
import { AppError, ERRORS, type ErrorCode, errorBody, logLevelOf } from '../errors.ts';
import { type SecurityHeaders, setSecurityHeaders } from './security.ts';
import { validationMessage } from './validation.ts';

/** Messages that say more than the catalogue's generic one. */
const FRAMEWORK_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: 'The request body is empty; send a JSON object.',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'The Content-Length header does not match the body.',
  FST_ERR_BAD_URL: 'The request path is not a valid URL (bad percent-encoding).',
};

const FRAMEWORK_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_REQ_FILE_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_BAD_URL: 'BAD_REQUEST',
  FST_ERR_ASYNC_CONSTRAINT: 'BAD_REQUEST',
  FST_ERR_MAX_PARAM_LENGTH: 'URI_TOO_LONG',
};

function send(
  reply: FastifyReply,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  // Routes get it from an onRequest hook already; routing errors never run the hooks.
  reply.header('x-request-id', reply.request.id);
  const body = errorBody(status, code, message, status >= 500 ? String(reply.request.id) : undefined);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

function frameworkMessage(fe: FastifyError, request: FastifyRequest): string {
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    // The header is echoed only when it looks like a media type, never as arbitrary text.
    const given =
      String(request.headers['content-type'] ?? '')
        .split(';')[0]
        ?.trim() ?? '';
    return /^[\w.+-]+\/[\w.+-]+$/.test(given)
      ? `Unsupported content type: ${given}. Send application/json.`
      : 'Unsupported or missing content type. Send application/json.';
  }
  const mapped = FRAMEWORK_CODES[fe.code];
  return FRAMEWORK_MESSAGES[fe.code] ?? (mapped ? ERRORS[mapped].message : ERRORS.BAD_REQUEST.message);
}

/**
 * Fastify's `frameworkErrors` option: errors raised while routing (a malformed percent-encoding, an
 * over-long path parameter), before any route, hook or error handler runs; so the security headers the
 * onRequest hook sets on every other answer are set here.
 */
export function frameworkErrors(securityHeaders: SecurityHeaders) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    setSecurityHeaders(reply.raw, securityHeaders);
    const code = FRAMEWORK_CODES[err.code] ?? 'BAD_REQUEST';
    return send(reply, ERRORS[code].status, code, frameworkMessage(err, request));
  };
}

/** What a client error (Node's `clientError`) is answered with. */
function clientErrorAnswer(errCode: string | undefined): { code: ErrorCode; message: string } {
  if (errCode === 'HPE_HEADER_OVERFLOW')
    return { code: 'HEADERS_TOO_LARGE', message: ERRORS.HEADERS_TOO_LARGE.message };
  if (errCode === 'ERR_HTTP_REQUEST_TIMEOUT')
    return { code: 'REQUEST_TIMEOUT', message: ERRORS.REQUEST_TIMEOUT.message };
  return { code: 'BAD_REQUEST', message: 'The request is not valid HTTP.' };
}

/** How long, and how many more bytes, an answered connection is drained before it is destroyed. */
export const LINGER_MS = 2000;
export const LINGER_BYTES = 1024 * 1024;

/** Connections answered and draining: Node's parser reports its error again for every further chunk. */
const lingering = new WeakSet<Duplex>();

/**
 * A lingering close (as nginx and Apache do): the answer is followed by our FIN, and what the client is
 * still sending (the rest of an oversized request) is read and discarded until it stops, LINGER_MS pass or
 * LINGER_BYTES more arrive. Destroying the socket with unread bytes would make the kernel send a reset,
 * and a client that is still writing then loses the answer it has not read yet.
 */
function lingerAndClose(socket: Duplex): void {
  lingering.add(socket);
  let received = 0;
  const close = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  // Node's own listeners (the parser) may consume the data first; these see what reaches the stream.
  socket.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received > LINGER_BYTES) close();
  });
  socket.once('end', close);
  socket.once('close', () => clearTimeout(timer));
  socket.on('error', () => {});
  socket.end();
  socket.resume();
}

/**
 * Fastify's `clientErrorHandler` option: a request Node's HTTP parser refused (a malformed request line
 * or header, headers over the size limit, a request that did not arrive within the timeouts). There is no
 * request or reply, so the answer is written to the socket by hand: the error body, the security headers
 * and a fresh x-request-id, then the connection is closed with a lingering close (lingerAndClose). The
 * guards are Node's and Fastify's own.
 */
export function clientErrorHandler(securityHeaders: SecurityHeaders) {
  return function onClientError(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
    // A reset connection is already gone, and a destroyed one has nobody to answer; one already answered
    // is draining, and the parser reports its error again for each chunk it is handed.
    if (err.code === 'ECONNRESET' || socket.destroyed || lingering.has(socket)) return;
    const { code, message } = clientErrorAnswer(err.code);
    const status = ERRORS[code].status;
    const requestId = randomUUID();
    // err.rawPacket (the bytes received) is not logged: it may hold credentials.
    this.log.debug({ err: { code: err.code, message: err.message }, requestId, status }, 'client error');
    // A response already under way on this connection (keep-alive) must not be interleaved with ours.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) {
      // An answer to HEAD has no body (RFC 9110 §9.3.2): a client reading one as the next response breaks.
      const received = (err as { rawPacket?: unknown }).rawPacket;
      const isHead = Buffer.isBuffer(received) && received.subarray(0, 5).toString('latin1') === 'HEAD ';
      const body = JSON.stringify(errorBody(status, code, message));
      let head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n`;
      for (const [name, value] of securityHeaders) head += `${name}: ${value}\r\n`;
      head +=
        `x-request-id: ${requestId}\r\n` +
        'content-type: application/json; charset=utf-8\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n';
      socket.write(isHead ? head : head + body);
      lingerAndClose(socket);
      return;
    }
    socket.destroy(err);
  };
}

/** Whether `err`, or an error it wraps (its `cause`, a few levels deep), is a `type`. */
function causedBy(err: unknown, type: abstract new (...args: never[]) => Error): boolean {
  let e: unknown = err;
  for (let depth = 0; e && depth < 5; depth++) {
    if (e instanceof type) return true;
    e = (e as Error).cause;
  }
  return false;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      const level = logLevelOf(err.code);
      // A fault is logged with its stack and cause; a deliberate answer (a refusal, a 501 the
      // configuration explains) is one line with its code: no stack, nothing an alert should page on.
      // (`errorCode`, not `code`: the logger removes `code` values outside errors, as OAuth codes.)
      if (level === 'error') request.log.error({ err, cause: err.cause }, err.message);
      else if (level) request.log[level]({ errorCode: err.code, statusCode: err.statusCode }, err.message);
      return send(reply, err.statusCode, err.code, err.message, err.headers);
    }
    const fe = err as FastifyError;
    if (fe.validation) {
      return send(
        reply,
        400,
        'VALIDATION',
        validationMessage(fe.validation as never, fe.validationContext ?? 'body'),
      );
    }
    const mapped = fe.code ? FRAMEWORK_CODES[fe.code] : undefined;
    if (mapped) {
      return send(reply, ERRORS[mapped].status, mapped, frameworkMessage(fe, request));
    }
    if (fe.statusCode === 429) {
      return send(reply, 429, 'RATE_LIMITED', ERRORS.RATE_LIMITED.message);
    }
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      // A 4xx raised by a plugin: its message is meant for the client.
      return send(reply, fe.statusCode, fe.code ?? 'BAD_REQUEST', fe.message || ERRORS.BAD_REQUEST.message);
    }
    if (causedBy(err, DatabaseUnavailable)) {
      // Logged once per outage by the database's watcher (db/availability.ts), not once per request.
      const unavailable = new AppError('DATABASE_UNAVAILABLE', undefined, { cause: err });
      request.log.debug({ err }, unavailable.message);
      return send(reply, unavailable.statusCode, unavailable.code, unavailable.message, unavailable.headers);
    }
    if (err instanceof ForeignKeyViolation && err.ofAccount) {
      // A write for an account that a concurrent request deleted (an access token stays valid until it
      // expires): the caller's account is gone, as the revocation check would have said a moment later.
      return send(reply, 401, 'UNAUTHENTICATED', 'The account no longer exists.');
    }
    request.log.error({ err }, 'unhandled error');
    return send(reply, 500, 'INTERNAL', ERRORS.INTERNAL.message);
  });

  // Fastify would otherwise parse text/plain into a string, and a JSON route would answer a confusing
  // "must be of type object" instead of saying that the content type is wrong.
  app.removeContentTypeParser('text/plain');

  app.setNotFoundHandler((_request, reply) => send(reply, 404, 'NOT_FOUND', ERRORS.NOT_FOUND.message));
}
