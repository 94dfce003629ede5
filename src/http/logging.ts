/**
 * The service's logger: pino, JSON lines, with nothing in them that could take over a session, an
 * account or a file. Anyone who can read logs (a log pipeline, a support tool) must not learn a password,
 * a refresh, access, magic-link or file token, a ticket, an MFA secret or code, a cookie or the admin
 * secret. Three mechanisms, at every level down to `trace`:
 * - request lines carry the URL with the values of secret-bearing query parameters replaced
 *   (`?refresh_token=[redacted]`): GET routes take refresh tokens, tickets, magic-link and file tokens
 *   in the query, and OAuth callbacks take codes and state;
 * - errors are logged with their type, message, code and stack only, messages scrubbed the same way, and
 *   without the properties where libraries keep what was sent (bodies, headers, raw packets, query
 *   parameters);
 * - pino's `redact` blanks headers and credential fields wherever a log call names them.
 * Request bodies and headers are never logged. The development outbox logs its links on purpose (it is
 * how a newcomer clicks through the flows); it exists only outside production.
 */
import type { DestinationStream, LoggerOptions, Logger as PinoLogger } from 'pino';
import pino from 'pino';

export const REDACTED = '[redacted]';

/** Query parameter names whose values are secrets, compared in lower case. */
const SECRET_PARAMS = new Set([
  'code',
  'state',
  'key',
  'sig',
  'auth',
  'authorization',
  'nonce',
  'otp',
  'totp',
  'mfa',
]);
/** …and any name containing one of these. */
const SECRET_PARTS =
  /token|ticket|secret|passw|signature|credential|cookie|session|verifier|apikey|api_key|jwt/;

/** True when a query parameter of this name carries a secret. */
export function isSecretParam(name: string): boolean {
  const n = name.toLowerCase();
  return SECRET_PARAMS.has(n) || SECRET_PARTS.test(n);
}

/** The decoded parameter name, or undefined when it cannot be decoded. */
function decodedName(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

function secretName(raw: string): boolean {
  const name = decodedName(raw);
  return name === undefined || isSecretParam(name);
}

/**
 * `url` with the value of every secret-bearing query parameter replaced by `[redacted]`; the path and
 * the other parameters are kept as sent. A parameter whose name cannot be decoded counts as secret.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      return eq >= 0 && secretName(part.slice(0, eq)) ? `${part.slice(0, eq)}=${REDACTED}` : part;
    });
  return `${url.slice(0, q)}?${query.join('&')}`;
}

/** Every secret-bearing `name=value` in free text (an error message quoting a URL), scrubbed. */
export function redactText(text: string): string {
  return text.replace(/([\w.%-]+)=([^&\s"'<>;,]*)/g, (all, name: string) =>
    secretName(name) ? `${name}=${REDACTED}` : all,
  );
}

/** What a request line says about the request: never its headers or body. */
function requestSerializer(req: {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}) {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : undefined,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** Properties where libraries keep what was sent or received; an error is logged without them. */
const ERROR_PROPERTIES_DROPPED = new Set([
  'config',
  'request',
  'response',
  'req',
  'res',
  'body',
  'headers',
  'rawPacket',
  'params',
  'parameters',
  'query',
  'options',
  'cookies',
  'payload',
]);

/** pino's error serializer, less what could carry a secret (see ERROR_PROPERTIES_DROPPED). */
export function errorSerializer(err: unknown): unknown {
  if (!(err instanceof Error) && (typeof err !== 'object' || err === null)) return err;
  const out = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  for (const key of Object.keys(out)) {
    if (ERROR_PROPERTIES_DROPPED.has(key)) delete out[key];
    else if (typeof out[key] === 'string') out[key] = redactText(out[key] as string);
  }
  return out;
}

const HEADERS = ['authorization', 'cookie', 'set-cookie', 'x-admin-secret', 'x-hasura-admin-secret'];
const FIELDS = [
  'password',
  'new_password',
  'old_password',
  'refresh_token',
  'access_token',
  'jwt_token',
  'ticket',
  'token',
  'otp_secret',
  'code',
  'cookie',
  'secret',
];

/** pino `redact` paths: headers wherever a request, response or headers object is logged, and credentials. */
export const REDACT_PATHS: readonly string[] = [
  ...['req', 'res', 'request', 'response'].flatMap((o) => HEADERS.map((h) => `${o}.headers["${h}"]`)),
  ...HEADERS.map((h) => `headers["${h}"]`),
  ...FIELDS.flatMap((f) => [f, `*.${f}`, `body.${f}`]),
];

/** The options every logger of the service is built with (main, buildApp's own, the tests' captures). */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    serializers: { req: requestSerializer, err: errorSerializer, error: errorSerializer },
  };
}

/** A logger at `level`, writing JSON lines to stdout or to `destination`. */
export function createLogger(level: string, destination?: DestinationStream): PinoLogger {
  return destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
}
