/**
 * Turns every failure into the one error body `{statusCode, error, message, code}`. AppErrors carry their
 * own status; framework errors (bad JSON, wrong content type, oversize body, schema failures) become 4xx
 * with a message; anything else is a 500 that shows no internals but carries the request id, and is logged.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS, type ErrorCode, errorBody } from '../errors.ts';
import { validationMessage } from './validation.ts';

/** The error body as a response schema, for routes to declare their 4xx/5xx answers in OpenAPI. */
export const ErrorBodySchema = Type.Object(
  {
    statusCode: Type.Integer(),
    error: Type.String(),
    message: Type.String(),
    code: Type.String(),
    requestId: Type.Optional(Type.String({ description: 'Present on 5xx answers; same as x-request-id.' })),
  },
  { description: 'Error', additionalProperties: false },
);

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
 * over-long path parameter), before any route or error handler runs.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const code = FRAMEWORK_CODES[err.code] ?? 'BAD_REQUEST';
  return send(reply, ERRORS[code].status, code, frameworkMessage(err, request));
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      if (err.statusCode >= 500) request.log.error({ err, cause: err.cause }, err.message);
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
    request.log.error({ err }, 'unhandled error');
    return send(reply, 500, 'INTERNAL', ERRORS.INTERNAL.message);
  });

  // Fastify would otherwise parse text/plain into a string, and a JSON route would answer a confusing
  // "must be of type object" instead of saying that the content type is wrong.
  app.removeContentTypeParser('text/plain');

  app.setNotFoundHandler((_request, reply) => send(reply, 404, 'NOT_FOUND', ERRORS.NOT_FOUND.message));
}
