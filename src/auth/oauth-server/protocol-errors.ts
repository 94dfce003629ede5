/**
 * The error answers of the OAuth protocol endpoints (token, revocation, introspection, registration):
 * RFC 6749 §5.2's body `{error, error_description}`, with the codes the RFCs define. These codes are the
 * protocol's, so they are listed here rather than in the project's catalogue (src/errors.ts), whose body
 * every other route keeps.
 */
import type { FastifyError, FastifyInstance } from 'fastify';

const STATUS = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  invalid_target: 400,
  invalid_token: 401,
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  unsupported_token_type: 400,
  access_denied: 403,
} as const;

/** RFC 6749 §5.2's error body, as a response schema. */
export const OAuthErrorBody = {
  type: 'object',
  description: 'RFC 6749 error',
  properties: { error: { type: 'string' }, error_description: { type: 'string' } },
  required: ['error'],
} as const;

/** Any JSON object (the protocol's answers carry fields that vary with the token). */
export const AnyObject = { type: 'object', additionalProperties: true } as const;

export type ProtocolErrorCode = keyof typeof STATUS;

export class OAuthProtocolError extends Error {
  readonly status: number;
  constructor(
    readonly error: ProtocolErrorCode,
    readonly description: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
    this.status = STATUS[error];
  }
}

/**
 * Answers this context's errors with RFC 6749's body: protocol errors as they are, malformed requests
 * (schema, body parsing) as `invalid_request`. Anything else (rate limits, an unavailable database, a
 * fault) goes on to the project's error handler.
 */
export function protocolErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | OAuthProtocolError, _request, reply) => {
    if (err instanceof OAuthProtocolError) {
      void reply
        .code(err.status)
        .headers(err.headers)
        .header('cache-control', 'no-store')
        .send({ error: err.error, error_description: err.description });
      return reply;
    }
    const status = (err as FastifyError).statusCode ?? 500;
    if (
      (err as FastifyError).validation ||
      (status === 400 && (err as FastifyError).code?.startsWith('FST_'))
    ) {
      void reply
        .code(400)
        .header('cache-control', 'no-store')
        .send({ error: 'invalid_request', error_description: err.message.slice(0, 300) });
      return reply;
    }
    if (status === 415) {
      void reply.code(400).send({
        error: 'invalid_request',
        error_description: 'the body must be application/x-www-form-urlencoded',
      });
      return reply;
    }
    throw err;
  });
}
