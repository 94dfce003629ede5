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
 * - every line, whoever writes it (our code, Fastify, a plugin: @fastify/multipart logs the request's
 *   headers at `trace`), passes through one redaction (`redactLogObject`, pino's `formatters.log` and
 *   `formatters.bindings`, and the `logMethod` hook for the message): at any depth, a property or header
 *   with a credential's name (authorization, cookie, set-cookie, the admin-secret headers, password,
 *   token, ticket, code…) is replaced, and so are secret query values and credential headers quoted in
 *   text. pino's `redact` paths cannot say "at any depth", so they are not used.
 * Request bodies and headers are never logged on purpose. The development outbox logs its links on
 * purpose (it is how a newcomer clicks through the flows; its line is marked SHOWN_ON_PURPOSE); it exists
 * only outside production.
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
 * Path segments that are secrets: the id of a share link, in its download URL (`/storage/s/<id>`) and in
 * the DELETE its owner may send (`/storage/shares/<id>`). Wherever the prefix sits (a proxy may mount the
 * service under a path), and whatever follows the id.
 */
const SECRET_PATH = /(\/storage\/(?:s|shares)\/)[^/?#\s"'<>]+/g;

function redactPath(path: string): string {
  return path.includes('/storage/') ? path.replace(SECRET_PATH, `$1${REDACTED}`) : path;
}

/**
 * `url` with the secrets it carries replaced by `[redacted]`: the value of every secret-bearing query
 * parameter, and a share link's id in the path (SECRET_PATH); the rest is kept as sent. A parameter
 * whose name cannot be decoded counts as secret.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return redactPath(url);
  const query = url
    .slice(q + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      return eq >= 0 && secretName(part.slice(0, eq)) ? `${part.slice(0, eq)}=${REDACTED}` : part;
    });
  return `${redactPath(url.slice(0, q))}?${query.join('&')}`;
}

/**
 * Every secret-bearing `name=value` and share-link path (SECRET_PATH) in free text (an error message
 * quoting a URL), scrubbed.
 */
export function redactText(text: string): string {
  return redactPath(text).replace(/([\w.%-]+)=([^&\s"'<>;,]*)/g, (all, name: string) =>
    secretName(name) ? `${name}=${REDACTED}` : all,
  );
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

/**
 * Header names that carry credentials, besides every name `isSecretParam` matches (which already covers
 * `authorization`, `cookie`, `set-cookie` and any `*-secret`, such as `x-admin-secret` and
 * `x-hasura-admin-secret`, the two admin-secret headers the service reads or sends).
 */
const SECRET_HEADERS = new Set(['authorization', 'proxy-authorization', 'x-api-key', 'x-amz-security-token']);

/** True when a property (or header) of this name holds a secret, at whatever depth it sits. */
export function isSecretKey(name: string): boolean {
  return SECRET_HEADERS.has(name.toLowerCase()) || isSecretParam(name);
}

/** A string that may hold a secret in free text: a `name=value`, or a header line such as `Cookie: …`. */
const MAYBE_SECRET_TEXT = /=|authoriz|cookie|secret|api-key|\/storage\//i;
/** A credential header quoted in text (a raw request, a response head, a message): its value goes. */
const HEADER_IN_TEXT =
  /\b((?:proxy-)?authorization|set-cookie|cookie|x-[\w-]*secret|x-api-key)([ \t]*:[ \t]*)[^\r\n]*/gi;

function scrubString(text: string): string {
  if (!MAYBE_SECRET_TEXT.test(text)) return text;
  return redactText(text).replace(HEADER_IN_TEXT, (_all, name: string, sep: string) => name + sep + REDACTED);
}

/** How deep a logged value is inspected; anything deeper is replaced, since it could not be checked. */
const MAX_DEPTH = 10;
const TOO_DEEP = '[too deep to log]';
const CIRCULAR = '[circular]';

/**
 * A log line on purpose shows a secret (the development outbox's links): the object carries this symbol
 * (pino does not print symbols; a registered symbol, so that mail/, a leaf, need not import this file).
 * Secret-named properties are still removed; free text is kept.
 */
export const SHOWN_ON_PURPOSE: unique symbol = Symbol.for('gatehouse.log.shown-on-purpose');

interface Walk {
  /** The objects from the root to here (cycle check; at most MAX_DEPTH long). */
  path: object[];
  /** Whether free text is scrubbed (false for a line marked SHOWN_ON_PURPOSE). */
  text: boolean;
}

/**
 * `value` as it may be logged: secret-named properties replaced at any depth, credential headers in
 * arrays of raw header pairs and in text replaced, secret query values in text replaced. The same
 * reference comes back when nothing had to change, so an ordinary line costs a walk and no copy.
 */
function scrub(value: unknown, depth: number, walk: Walk): unknown {
  if (typeof value === 'string') return walk.text ? scrubString(value) : value;
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Error) return depth >= MAX_DEPTH ? TOO_DEEP : serializeError(value, depth, walk);
  if (value instanceof Date) return value;
  // Bytes are printed by JSON as an array of numbers (a raw packet with its headers): their length only.
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  if (depth >= MAX_DEPTH) return TOO_DEEP;
  if (walk.path.includes(value)) return CIRCULAR;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  // What JSON would print (a URL's href, with its query): walk that instead.
  if (typeof toJSON === 'function') return scrub(toJSON.call(value), depth, walk);
  walk.path.push(value);
  try {
    return Array.isArray(value) ? scrubArray(value, depth, walk) : scrubObject(value, depth, walk, false);
  } finally {
    walk.path.pop();
  }
}

function scrubArray(list: unknown[], depth: number, walk: Walk): unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    // Raw headers (`rawHeaders`, `[name, value, name, value…]`): the value after a credential's name.
    const prev = i > 0 ? list[i - 1] : undefined;
    const next =
      typeof prev === 'string' && typeof item === 'string' && isSecretKey(prev) && item !== REDACTED
        ? REDACTED
        : scrub(item, depth + 1, walk);
    if (next !== item) {
      out ??= list.slice();
      out[i] = next;
    }
  }
  return out ?? list;
}

function scrubObject(obj: object, depth: number, walk: Walk, isError: boolean): object {
  let out: Record<string, unknown> | undefined;
  const record = obj as Record<string, unknown>;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    const value = record[key];
    let next: unknown;
    // An error's `code` is its kind (ECONNREFUSED, INVALID_TICKET), not an authorization code.
    if (value !== undefined && value !== null && isSecretKey(key) && !(isError && key === 'code'))
      next = value === REDACTED ? value : REDACTED;
    else next = scrub(value, depth + 1, walk);
    if (next !== value) {
      out ??= { ...record };
      out[key] = next;
    }
  }
  return out ?? obj;
}

/** pino's error serializer, less what could carry a secret (ERROR_PROPERTIES_DROPPED), then scrubbed. */
function serializeError(err: unknown, depth: number, walk: Walk): unknown {
  if (!(err instanceof Error) && (typeof err !== 'object' || err === null)) return scrub(err, depth, walk);
  const out = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  for (const key of Object.keys(out)) if (ERROR_PROPERTIES_DROPPED.has(key)) delete out[key];
  // Error messages and stacks quote URLs: scrubbed even on a line shown on purpose.
  return scrubObject(out, depth, { path: walk.path, text: true }, true);
}

/** pino's error serializer, less what could carry a secret (see ERROR_PROPERTIES_DROPPED). */
export function errorSerializer(err: unknown): unknown {
  return serializeError(err, 0, { path: [], text: true });
}

/**
 * What a request line says about the request: never its headers or body; the URL with its secret query
 * values replaced (nothing else here comes from the client but the method and Host).
 */
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

/** What a response line says about the response (Fastify's own choice): its status only. */
function responseSerializer(reply: { statusCode?: number }) {
  return { statusCode: reply.statusCode };
}

const SERIALIZERS = {
  req: requestSerializer,
  res: responseSerializer,
  err: errorSerializer,
  error: errorSerializer,
};

/**
 * The one redaction every line goes through, whoever logs it (our code, Fastify, a plugin such as
 * @fastify/multipart logging its busboy options with the request's headers at trace level). Keys with a
 * serializer are left to it: the serializers above build new objects and scrub them.
 */
export function redactLogObject(obj: Record<string, unknown>): Record<string, unknown> {
  const walk: Walk = { path: [obj], text: obj[SHOWN_ON_PURPOSE as unknown as string] !== true };
  let out: Record<string, unknown> | undefined;
  for (const key in obj) {
    if (!Object.hasOwn(obj, key) || Object.hasOwn(SERIALIZERS, key)) continue;
    const value = obj[key];
    let next: unknown;
    try {
      next = value !== undefined && value !== null && isSecretKey(key) ? REDACTED : scrub(value, 1, walk);
    } catch {
      // A getter that throws: JSON would have failed on it too.
      next = '[not loggable]';
    }
    if (next !== value) {
      out ??= { ...obj };
      out[key] = next;
    }
  }
  return out ?? obj;
}

/**
 * pino's `logMethod` hook: the message and its format arguments, scrubbed as free text. An error logged
 * alone (`log.error(err)`) becomes `{err}` with its message scrubbed (pino would print it raw as `msg`).
 */
function logMethod(this: PinoLogger, args: unknown[], method: (...a: unknown[]) => void): void {
  const first = args[0];
  if (first instanceof Error && typeof args[1] !== 'string') {
    method.apply(this, [{ err: first }, scrubString(first.message), ...args.slice(1)]);
    return;
  }
  // `log.error({ err })`: pino would take the message from the error, unscrubbed.
  const inner = typeof first === 'object' && first !== null ? (first as { err?: unknown }).err : undefined;
  if (inner instanceof Error && args.length === 1) args.push(inner.message);
  const onPurpose =
    typeof first === 'object' &&
    first !== null &&
    (first as Record<symbol, unknown>)[SHOWN_ON_PURPOSE] === true;
  if (!onPurpose) {
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      if (typeof a === 'string') args[i] = scrubString(a);
      else if (i > 0 && typeof a === 'object' && a !== null) args[i] = scrub(a, 0, { path: [], text: true });
    }
  }
  method.apply(this, args);
}

/** The options every logger of the service is built with, through createLogger (main, buildApp's own, tests). */
function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    serializers: SERIALIZERS,
    formatters: { log: redactLogObject, bindings: redactLogObject },
    hooks: { logMethod },
  };
}

/**
 * A logger at `level`, writing JSON lines to stdout or to `destination`. pino applies
 * `formatters.bindings` to the root's bindings only, so `child` is wrapped to scrub a child's bindings
 * (Fastify's per-request `reqId`, a plugin's own); children inherit the wrapper.
 */
export function createLogger(level: string, destination?: DestinationStream): PinoLogger {
  const log = destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
  const child = log.child;
  log.child = function (this: PinoLogger, bindings, options) {
    return child.call(this, redactLogObject(bindings), options);
  } as typeof log.child;
  return log;
}
