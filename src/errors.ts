/**
 * The error catalogue. Every error the API answers with is listed here once, with its status, a stable
 * `code` and its message; domain code throws `AppError`s built from it and nothing else decides HTTP
 * statuses. The body is HBP's `{statusCode, error, message}` plus `code`.
 */
import { STATUS_CODES } from 'node:http';
import { type TObject, Type } from '@sinclair/typebox';

interface ErrorSpec {
  status: number;
  message: string;
  /**
   * `warn`: a 5xx that is a deliberate refusal, not a fault; `info`: an answer the configuration
   * explains (HBP's 501 on /auth/jwks with a shared key), nothing for an operator to act on; `debug`: a
   * fault logged once per outage by the part that sees it begin and end, not once per request (see
   * logLevelOf). Only `error` lines carry the error's stack.
   */
  logLevel?: 'warn' | 'info' | 'debug';
  /** Seconds for the `Retry-After` header of a 503 whose cause is expected to pass. */
  retryAfter?: number;
}

export const ERRORS = {
  // generic HTTP
  BAD_REQUEST: { status: 400, message: 'Bad request.' },
  VALIDATION: { status: 400, message: 'The request is not valid.' },
  INVALID_JSON: { status: 400, message: 'The request body is not valid JSON.' },
  NOT_FOUND: { status: 404, message: 'Not Found' },
  REQUEST_TIMEOUT: { status: 408, message: 'The request did not arrive in time.' },
  URI_TOO_LONG: { status: 414, message: 'A path parameter of the request is too long.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Unsupported content type.' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'The request body is too large.' },
  RATE_LIMITED: { status: 429, message: 'You are being rate limited.' },
  RATE_LIMIT_UNAVAILABLE: {
    status: 503,
    message: 'The rate-limit store is unavailable; try again shortly.',
    logLevel: 'debug',
    retryAfter: 5,
  },
  HEADERS_TOO_LARGE: { status: 431, message: 'The request headers are too large.' },
  INTERNAL: { status: 500, message: 'An internal server error occurred.' },
  SERVICE_UNAVAILABLE: {
    status: 503,
    message: 'A service this request needs is unavailable.',
    retryAfter: 5,
  },
  DATABASE_UNAVAILABLE: {
    status: 503,
    message: 'The database is unavailable; try again shortly.',
    logLevel: 'debug',
    retryAfter: 5,
  },
  SHUTTING_DOWN: {
    status: 503,
    message: 'The server is shutting down; retry the request.',
    logLevel: 'warn',
  },

  // auth
  UNAUTHENTICATED: { status: 401, message: 'Not logged in' },
  INVALID_CREDENTIALS: { status: 401, message: 'Username and password do not match' },
  INVALID_REFRESH_TOKEN: { status: 401, message: 'Invalid or expired refresh token.' },
  SESSION_NOT_FOUND: { status: 404, message: 'No such session.' },
  ROLE_NOT_ALLOWED: {
    status: 401,
    message: 'The requested x-hasura-role is not one of the allowed roles of the access token.',
  },
  INVALID_TICKET: { status: 401, message: 'Invalid or expired ticket.' },
  INVALID_TOKEN: { status: 401, message: 'Invalid or expired token.' },
  INVALID_CODE: { status: 401, message: 'Invalid or expired code.' },
  INVALID_ADMIN_SECRET: { status: 401, message: 'Invalid x-admin-secret' },
  INCORRECT_PASSWORD: { status: 401, message: 'Incorrect current password.' },
  REAUTHENTICATION_REQUIRED: {
    status: 403,
    message:
      'This change needs a recent sign-in: sign in again, or send your current password in "password".',
  },
  CANNOT_DELETE_ACCOUNT: { status: 401, message: 'Unable to delete account' },
  CSRF: {
    status: 403,
    message:
      'Cross-site request refused: a request authenticated by cookie that changes something must come from this service or an allowed origin (CORS_ORIGINS), shown by its Origin header. From elsewhere, send the access token as "Authorization: Bearer <token>".',
  },
  ACCOUNT_EXISTS: { status: 400, message: 'Account already exists.' },
  ACCOUNT_NOT_ACTIVATED: { status: 400, message: 'Account is not activated.' },
  ACCOUNT_DISABLED: { status: 403, message: 'This account is disabled.' },
  PASSWORD_TOO_WEAK: { status: 400, message: 'Password is too weak.' },
  PASSWORD_HASHING_BUSY: {
    status: 503,
    message: 'The server is busy checking passwords; try again shortly.',
    logLevel: 'warn',
  },
  PASSWORD_CHECK_UNAVAILABLE: {
    status: 503,
    message: 'The password breach check is unavailable; try again later.',
  },
  EMAIL_NOT_ALLOWED: { status: 400, message: 'Cannot use this email.' },
  EMAIL_DOMAIN_NOT_ALLOWED: { status: 400, message: '"email" is not in an authorised domain' },
  DEFAULT_ROLE_NOT_ALLOWED: { status: 400, message: 'Default role must be part of allowed roles.' },
  ROLES_NOT_ALLOWED: { status: 400, message: 'allowed roles must be a subset of ALLOWED_ROLES' },
  REDIRECT_NOT_ALLOWED: { status: 400, message: 'redirect_to is not an allowed redirect URL.' },
  ACCOUNT_EXISTS_INACTIVE: { status: 400, message: 'Account already exists but is not activated.' },
  INVALID_USER_DATA: {
    status: 400,
    message: '"user_data" holds a value its column cannot store (wrong type, or refused by a constraint).',
  },
  REDIRECT_NOT_CONFIGURED: { status: 500, message: 'REDIRECT_URL_SUCCESS is not configured.' },
  JWKS_NOT_AVAILABLE: { status: 501, message: 'JWKS is not implemented on this server.', logLevel: 'info' },
  MFA_ALREADY_ENABLED: { status: 400, message: 'MFA is already enabled.' },
  MFA_ALREADY_DISABLED: { status: 400, message: 'MFA is already disabled.' },
  MFA_NOT_ENABLED: { status: 400, message: 'MFA is not enabled.' },
  OTP_SECRET_NOT_SET: { status: 400, message: 'OTP secret is not set.' },
  INVALID_TOTP: { status: 401, message: 'Invalid two-factor code.' },
  CLAIMS_HOOK_FAILED: {
    status: 503,
    message:
      'The custom-claims hook failed, timed out or answered badly, so no token was issued; try again shortly.',
    retryAfter: 5,
  },
  EMAILS_DISABLED: {
    status: 503,
    message: 'This server does not send emails (EMAILS_ENABLED is false).',
    logLevel: 'warn',
  },

  // admin API
  ADMIN_REQUIRED: {
    status: 403,
    message:
      'This route is for administrators: send the admin secret in x-hasura-admin-secret, or an access token whose roles include ADMIN_ROLE.',
  },
  USER_NOT_FOUND: { status: 404, message: 'No user has this id.' },
  UNKNOWN_ROLE: { status: 400, message: 'A role given is not in auth.roles.' },
  LINK_NOT_AVAILABLE: { status: 409, message: 'This link cannot be made for this account.' },

  // provider sign-in (OAuth, OpenID Connect)
  PROVIDER_STATE_INVALID: {
    status: 400,
    message:
      'This sign-in cannot be finished: it was not started in this browser, has expired, or was already used. Start again.',
  },
  PROVIDER_DENIED: { status: 401, message: 'The sign-in provider did not grant access.' },
  ID_TOKEN_INVALID: { status: 401, message: "The provider's ID token is not valid for this sign-in." },
  PROVIDER_EMAIL_NOT_VERIFIED: {
    status: 403,
    message:
      'An account with this email exists, and the provider does not vouch that the email is yours. Sign in to that account another way, then link the provider.',
  },
  PROVIDER_EMAIL_IN_USE: {
    status: 409,
    message:
      'An account with this email exists, and its address has not been confirmed. Sign in to that account the way you usually do, then link the provider from there (or confirm the address with a password reset or a magic link first).',
  },
  PROVIDER_IDENTITY_IN_USE: {
    status: 409,
    message: 'This provider identity is already linked to another account.',
  },
  PROVIDER_ALREADY_LINKED: {
    status: 409,
    message: 'Another identity of this provider is already linked to the account; unlink it first.',
  },
  PASSKEY_MALFORMED: {
    status: 400,
    message:
      'The passkey credential is malformed: send the JSON form of the PublicKeyCredential (its toJSON()), base64url fields, within the size limits.',
  },
  PASSKEY_CHALLENGE_INVALID: {
    status: 400,
    message:
      'The passkey challenge is unknown, used, expired or from another ceremony: ask for new options and try again.',
  },
  PASSKEY_NOT_VERIFIED: {
    status: 400,
    message:
      'The new passkey could not be verified (origin, relying party, user presence or verification, or attestation).',
  },
  PASSKEY_INVALID: { status: 401, message: 'The passkey was not accepted.' },
  PASSKEY_COUNTER_REGRESSED: {
    status: 401,
    message:
      'The passkey was not accepted: its signature counter went backwards, a sign of a cloned authenticator. The account holder has been notified in the security feed.',
  },
  PASSKEY_ALREADY_REGISTERED: { status: 409, message: 'This passkey is already registered.' },
  PASSKEY_NOT_FOUND: { status: 404, message: 'No such passkey.' },
  LAST_SIGN_IN_METHOD: {
    status: 409,
    message:
      'This passkey is the only way to sign in to the account; add a password, another passkey or a provider first.',
  },
  PROVIDER_LAST_SIGN_IN_METHOD: {
    status: 409,
    message: 'This is the only way to sign in to the account; add a password or another provider first.',
  },
  PROVIDER_NOT_LINKED: { status: 404, message: 'This provider is not linked to the account.' },
  PROVIDER_TOKENS_NOT_STORED: { status: 404, message: 'No provider tokens are stored for this account.' },
  PROVIDER_RESPONSE_INVALID: { status: 502, message: 'The sign-in provider answered an invalid response.' },
  PROVIDER_UNAVAILABLE: { status: 503, message: 'The sign-in provider could not be reached; try again.' },

  // storage
  FORBIDDEN: { status: 403, message: 'Forbidden' },
  INVALID_KEY: { status: 400, message: 'The file path is not valid.' },
  FOLDER_UPLOAD: { status: 400, message: "Can't upload file that ends with /" },
  FILE_MISSING: { status: 400, message: 'The request has no file part named "file".' },
  TOO_MANY_FILES: { status: 400, message: 'Send exactly one file part named "file".' },
  INCORRECT_ACCESS_TOKEN: { status: 403, message: 'incorrect x-access-token' },
  TUS_VERSION_UNSUPPORTED: {
    status: 412,
    message: 'Send the header Tus-Resumable: 1.0.0 (the TUS version this server speaks).',
  },
  UPLOAD_OFFSET_MISMATCH: {
    status: 409,
    message: 'Upload-Offset is not the offset of the upload: send HEAD to learn it, then resume from there.',
  },
  UPLOAD_CHECKSUM_MISMATCH: {
    status: 460,
    message: 'The body does not match its Upload-Checksum; nothing of it was stored.',
  },
  RANGE_NOT_SATISFIABLE: { status: 416, message: 'Range not satisfiable.' },
  QUOTA_EXCEEDED: { status: 413, message: 'The upload would exceed your storage quota.' },
  STORAGE_UNAVAILABLE: { status: 503, message: 'The object store is unavailable.', retryAfter: 5 },
  SHARE_LINK_NOT_FOUND: { status: 404, message: 'No such share link.' },
  SHARE_LINK_GONE: {
    status: 410,
    message:
      'This share link no longer works: it expired, was revoked, has been used up, or its file was deleted.',
  },
  IMAGE_TOO_LARGE: { status: 422, message: 'The image is too large to transform.' },
  NOT_AN_IMAGE: { status: 415, message: 'The file is not an image that can be transformed.' },
  IMAGE_CORRUPT: { status: 422, message: 'The image could not be decoded.' },
  // 422, not 503: the same file and parameters would take as long again, so retrying cannot help; the
  // failure is remembered (IMAGE_FAILURE_TTL) and answered at once, like any other refusal of the input.
  IMAGE_TIMEOUT: { status: 422, message: 'The image transformation took too long.' },
  IMAGE_SVG_UNSAFE: {
    status: 422,
    message: 'The SVG refers to something outside itself; it is not rasterised.',
  },
  IMAGE_RENDERER_UNAVAILABLE: {
    status: 503,
    message: 'Images cannot be transformed right now; try again shortly.',
  },
  IMAGE_QUEUE_FULL: {
    status: 503,
    message: 'Too many image transformations are waiting; try again shortly.',
    logLevel: 'warn',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/**
 * How the error handler logs an AppError: 5xx at `error` (something is wrong with the server), unless
 * its entry says `warn` — a deliberate refusal (load shedding, a feature turned off) that needs no one
 * woken up — or `debug` — an outage of a dependency, logged once when it begins and once when it ends
 * by the part that watches it; below 500, not at all (the client's mistake).
 */
export function logLevelOf(code: ErrorCode): 'error' | 'warn' | 'info' | 'debug' | undefined {
  const spec: ErrorSpec = ERRORS[code];
  if (spec.status < 500) return undefined;
  return spec.logLevel ?? 'error';
}

/** Statuses Node does not name: TUS's checksum extension answers 460. */
const STATUS_TEXT: Record<number, string> = { 460: 'Checksum Mismatch' };

export class AppError extends Error {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    opts: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message ?? ERRORS[code].message, { cause: opts.cause });
    this.name = 'AppError';
    const spec: ErrorSpec = ERRORS[code];
    this.statusCode = spec.status;
    this.headers = opts.headers ?? {};
    if (
      spec.retryAfter !== undefined &&
      !Object.keys(this.headers).some((h) => h.toLowerCase() === 'retry-after')
    )
      this.headers = { ...this.headers, 'retry-after': String(spec.retryAfter) };
  }
}

export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  code: string;
  requestId?: string;
}

/** The error body as a response schema: every route declares its 4xx/5xx answers with it (OpenAPI). */
export const ErrorBodySchema = Type.Object(
  {
    statusCode: Type.Integer(),
    error: Type.String(),
    message: Type.String(),
    code: Type.String({ description: 'A code of the catalogue (docs/errors.md).' }),
    requestId: Type.Optional(Type.String({ description: 'Present on 5xx answers; same as x-request-id.' })),
  },
  { description: 'Error', additionalProperties: false },
);

/** The error answers a route documents, by status. */
export function errorResponses(...statuses: number[]): Record<number, TObject> {
  return Object.fromEntries(statuses.map((s) => [s, ErrorBodySchema]));
}

export function errorBody(statusCode: number, code: string, message: string, requestId?: string): ErrorBody {
  const body: ErrorBody = {
    statusCode,
    error: STATUS_TEXT[statusCode] ?? STATUS_CODES[statusCode] ?? 'Error',
    message,
    code,
  };
  if (requestId !== undefined) body.requestId = requestId;
  return body;
}
