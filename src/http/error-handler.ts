/**
 * Turns every failure into the one error body `{statusCode, error, message, code}`. AppErrors carry their
 * own status; framework errors (bad JSON, wrong content type, oversize body, schema failures) become 4xx
 * with a message; anything else is a 500 that shows no internals but carries the request id, and is logged.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS, type ErrorCode, errorBody } from '../errors.ts';
import { validationMessage } from './validation.ts';

const FRAMEWORK_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_REQ_FILE_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_BAD_URL: 'BAD_REQUEST',
  FST_ERR_ASYNC_CONSTRAINT: 'BAD_REQUEST',
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
      const message =
        mapped === 'UNSUPPORTED_MEDIA_TYPE'
          ? `Unsupported content type: ${request.headers['content-type'] ?? 'none'}.`
          : ERRORS[mapped].message;
      return send(reply, ERRORS[mapped].status, mapped, message);
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

  app.setNotFoundHandler((_request, reply) => send(reply, 404, 'NOT_FOUND', ERRORS.NOT_FOUND.message));
}
