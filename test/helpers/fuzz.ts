/**
 * A request fuzzer driven by the OpenAPI document (GET /openapi.json). Each operation's parameters and
 * JSON body schema give a request that would pass validation; a seeded generator then mutates it: wrong
 * types, missing and unknown fields, huge and unicode values, garbage content types, multipart bodies
 * cut short, forged or foreign credentials, malformed HTTP that only a raw socket can send. What it
 * checks is what every answer must satisfy, whatever the input: no 5xx, and an error answer has the one
 * error body `{statusCode, error, message, code}` with a code from the catalogue.
 *
 * The generator is our own (a few hundred lines) rather than fast-check: requests are built from a live
 * OpenAPI document, need values the service knows (tokens, file paths, provider states), and a failure is
 * reproduced from the printed seed and request, so shrinking would add little.
 */
import { randomUUID } from 'node:crypto';
import { type Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { ERRORS } from '../../src/errors.ts';

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 1;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

export interface Schema {
  type?: string | string[];
  format?: string;
  pattern?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  items?: Schema;
}

export interface Operation {
  method: string;
  /** The OpenAPI path (`/storage/o/{*}`). */
  path: string;
  params: { in: 'path' | 'query' | 'header'; name: string; schema: Schema }[];
  /** The JSON body schema, when the operation takes one. */
  body?: Schema;
  /** The storage upload: a multipart body. */
  multipart: boolean;
  /** `required`: bearer only; `optional`: bearer, admin secret or nothing; `none`: not declared. */
  security: 'required' | 'optional' | 'none';
}

interface OpenApiOperation {
  parameters?: { in: string; name: string; schema?: Schema }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  security?: Record<string, string[]>[];
  /** False on a route this configuration switches off (listed, marked, answering 404). */
  'x-gatehouse-enabled'?: boolean;
}

/** Every operation of an OpenAPI document, plus the routes it does not list that a client can still call. */
export function operationsOf(doc: { paths: Record<string, Record<string, OpenApiOperation>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      // A switched-off route is a 404 like any unknown path (the fuzzer sends those too): requests spent
      // on it would reach no handler.
      if (op['x-gatehouse-enabled'] === false) continue;
      const security = op.security?.some((s) => 'bearer' in s)
        ? op.security.some((s) => Object.keys(s).length === 0)
          ? 'optional'
          : 'required'
        : 'none';
      ops.push({
        method: method.toUpperCase(),
        path,
        params: (op.parameters ?? []).map((p) => ({
          in: p.in as 'path' | 'query' | 'header',
          name: p.name,
          schema: p.schema ?? {},
        })),
        body: op.requestBody?.content?.['application/json']?.schema,
        multipart: method === 'post' && path === '/storage/o/{*}',
        security,
      });
    }
  }
  // Not in the document: the document itself, CORS preflights, an unknown path, and a known path with a
  // method it does not have.
  for (const [method, path] of [
    ['GET', '/openapi.json'],
    ['OPTIONS', '/auth/login'],
    ['GET', '/no/such/route'],
    ['PUT', '/auth/login'],
  ] as const) {
    ops.push({ method, path, params: [], multipart: false, security: 'none' });
  }
  return ops;
}

export const opName = (op: Operation) => `${op.method} ${op.path}`;

/** A signed-in account the generator may use. */
export interface FuzzUser {
  email: string;
  password: string;
  userId: string;
  jwt: string;
  refreshToken: string;
  /** Paths of files this user uploaded (text, an image, a broken image). */
  files: string[];
}

/** What the generator knows of the service under test. */
export interface World {
  users(): readonly FuzzUser[];
  adminSecret: string;
  /** A signed refresh-token cookie (`name=value`) of a live session, when one is at hand. */
  cookie(): string | undefined;
  /** Starts a sign-in at `provider` and returns its state (undefined when the provider is off). */
  providerState(provider: string): Promise<string | undefined>;
  /** Origins the service trusts (CORS_ORIGINS), for CSRF and preflight checks. */
  origins: string[];
}

export interface FuzzRequest {
  method: string;
  /** Path and query as sent (already encoded, or raw garbage for `raw` requests). */
  url: string;
  headers: [string, string][];
  body?: Buffer;
  /** Sent over a raw socket: malformed HTTP that node's client refuses to write. */
  raw?: { head?: string; body?: Buffer };
  /** What the generator did, for the failure report. */
  notes: string[];
}

// --- values ----------------------------------------------------------------------------------------

const UNICODE = [
  'ünïcödé',
  '日本語のテキスト',
  '🔥💥🧨',
  '\u202Eevil\u202C',
  'a\u0000b',
  '\uD800',
  '\uDFFF\uD800',
  'ｆｕｌｌｗｉｄｔｈ',
  'Ω≈ç√∫',
  '\u200B\u200C\u200D',
  '\r\n\t',
];
const NASTY = [
  '',
  ' ',
  "' OR 1=1 --",
  '"; DROP TABLE auth.accounts; --',
  '../../../etc/passwd',
  '%00',
  '%',
  '%zz',
  '$\u{7b}7*7}', // a template placeholder
  '{{7*7}}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'null',
  'undefined',
  'NaN',
  '-1',
  '1e309',
  '0x1f',
  'true',
  '[]',
  '{}',
];
const WRONG_TYPES: unknown[] = [
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  true,
  false,
  null,
  [],
  ['a'],
  {},
  { a: 1 },
  '',
  'x',
];

function huge(rng: Rng): string {
  const n = rng.pick([129, 257, 513, 2049, 4097, 65_537, 300_000]);
  return rng.pick(['a', 'é', '🔥', '%', '\\', '"', '\u0000']).repeat(n);
}

function digits(n: number, rng: Rng): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String(rng.int(10));
  return s;
}

function alnum(n: number, rng: Rng): string {
  const chars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += chars[rng.int(chars.length)];
  return s;
}

/** A value of the kind a field of this name takes in real traffic (tokens, passwords, paths…). */
type Hint = (field: string) => unknown;

/** A value the schema accepts (as far as a small generator can tell). */
export function validValue(schema: Schema, rng: Rng, field = '', hint?: Hint): unknown {
  const hinted = hint?.(field);
  if (hinted !== undefined) return hinted;
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return rng.pick(schema.enum);
  const choice = schema.anyOf ?? schema.oneOf;
  if (choice?.length) return validValue(rng.pick(choice), rng, field, hint);
  const type = Array.isArray(schema.type) ? rng.pick(schema.type) : schema.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, s] of Object.entries(schema.properties ?? {})) {
        if (schema.required?.includes(k) || rng.chance(0.5)) out[k] = validValue(s, rng, k, hint);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: rng.int(3) }, () => validValue(schema.items ?? {}, rng, field, hint));
    case 'boolean':
      return rng.chance(0.5);
    case 'integer':
    case 'number': {
      const lo = schema.minimum ?? 0;
      const hi = schema.maximum ?? lo + 1000;
      const v = lo + rng.next() * (hi - lo);
      return type === 'integer' ? Math.floor(v) : v;
    }
    case 'string': {
      if (schema.format === 'email') return `fuzz-${randomUUID()}@example.com`;
      if (schema.format === 'uuid') return randomUUID();
      const fixed = schema.pattern ? /^\^\[0-9\]\{(\d+)\}\$$/.exec(schema.pattern) : null;
      if (fixed) return digits(Number(fixed[1]), rng);
      const lo = schema.minLength ?? 1;
      const hi = Math.min(schema.maxLength ?? 24, lo + 24);
      return alnum(lo + rng.int(hi - lo + 1), rng);
    }
    default:
      return alnum(8, rng);
  }
}

/** A value chosen to break the schema, or to sit on its edges. */
export function mutatedValue(schema: Schema, rng: Rng): unknown {
  switch (rng.int(7)) {
    case 0:
      return rng.pick(WRONG_TYPES);
    case 1:
      return huge(rng);
    case 2:
      return rng.pick(UNICODE);
    case 3:
      return rng.pick(NASTY);
    case 4: {
      // Exactly at and just past the declared bounds.
      const n = schema.maxLength ?? schema.minLength ?? 8;
      return 'b'.repeat(Math.max(0, n + rng.pick([-1, 0, 1])));
    }
    case 5:
      return schema.format === 'uuid' ? rng.pick(['not-a-uuid', '00000000-0000-0000-0000-000000000000']) : -0;
    default:
      return rng.pick([Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 2 ** 53 + 1, 1e-300]);
  }
}

/** A value, valid three times in four. */
function someValue(schema: Schema, rng: Rng, field: string, hint?: Hint): unknown {
  return rng.chance(0.75) ? validValue(schema, rng, field, hint) : mutatedValue(schema, rng);
}

// --- bodies ----------------------------------------------------------------------------------------

function jsonBody(schema: Schema, rng: Rng, hint: Hint, notes: string[]): { text: string } {
  const value = validValue(schema, rng, '', hint) as Record<string, unknown>;
  const roll = rng.int(12);
  if (roll < 4) {
    notes.push('valid body');
    return { text: JSON.stringify(value) };
  }
  if (roll < 8) {
    // Mutate one or more fields (or add one the schema does not have).
    const fields = [...Object.keys(schema.properties ?? {}), 'surprise', '__proto__', 'constructor'];
    for (let i = 0, n = 1 + rng.int(3); i < n; i++) {
      const f = rng.pick(fields);
      if (rng.chance(0.2)) {
        delete value[f];
        notes.push(`dropped ${f}`);
      } else {
        const v = mutatedValue(schema.properties?.[f] ?? {}, rng);
        Object.defineProperty(value, f, { value: v, enumerable: true, configurable: true, writable: true });
        notes.push(`mutated ${f}`);
      }
    }
    return { text: JSON.stringify(value) };
  }
  notes.push('garbage body');
  switch (rng.int(11)) {
    case 0:
      return { text: JSON.stringify(rng.pick(WRONG_TYPES)) };
    case 1:
      return { text: JSON.stringify(value).slice(0, rng.int(20)) };
    case 2:
      return { text: `${'['.repeat(20_000)}${']'.repeat(20_000)}` };
    case 3:
      return { text: `{"a":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_001)}` };
    case 4:
      return { text: `\uFEFF${JSON.stringify(value)}` };
    case 5:
      return { text: '{"__proto__": {"isAdmin": true}, "constructor": {"prototype": {"x": 1}}}' };
    case 6:
      return { text: JSON.stringify(value).replace(/^\{/, '{"email":"a@b.co","email":"x",') };
    case 7:
      return { text: `{"email": "${'\\u0000'.repeat(50)}", "password": "\\ud800"}` };
    case 8:
      return { text: 'x'.repeat(1024 * 1024 + 10) };
    case 9:
      return { text: `${JSON.stringify(value)}garbage` };
    default:
      return { text: '\u0000\u0001\u0002\u00ff' };
  }
}

const PNG_HEAD = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

function multipartBody(rng: Rng, notes: string[]): { body: Buffer; contentType: string; raw?: boolean } {
  const boundary = `----fuzz${alnum(12, rng)}`;
  const part = (head: string, data: Buffer | string) =>
    Buffer.concat([Buffer.from(`--${boundary}\r\n${head}\r\n\r\n`), Buffer.from(data), Buffer.from('\r\n')]);
  const file = (name = 'file', filename = 'f.txt', type = 'text/plain', data: Buffer | string = 'hello') =>
    part(
      `Content-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}`,
      data,
    );
  const end = Buffer.from(`--${boundary}--\r\n`);
  const ct = `multipart/form-data; boundary=${boundary}`;
  switch (rng.int(14)) {
    case 0:
      notes.push('multipart: one small file');
      return { body: Buffer.concat([file(), end]), contentType: ct };
    case 1:
      notes.push('multipart: image');
      return { body: Buffer.concat([file('file', 'i.png', 'image/png', PNG_HEAD), end]), contentType: ct };
    case 2:
      notes.push('multipart: two files');
      return { body: Buffer.concat([file(), file('file', 'g.txt'), end]), contentType: ct };
    case 3:
      notes.push('multipart: no file part');
      return {
        body: Buffer.concat([part('Content-Disposition: form-data; name="metadata"', '{"a":1}'), end]),
        contentType: ct,
      };
    case 4:
      notes.push('multipart: empty body');
      return { body: Buffer.alloc(0), contentType: ct };
    case 5:
      notes.push('multipart: no closing boundary');
      return { body: file(), contentType: ct };
    case 6:
      notes.push('multipart: wrong boundary');
      return { body: Buffer.concat([file(), end]), contentType: 'multipart/form-data; boundary=other' };
    case 7:
      notes.push('multipart: no boundary parameter');
      return { body: Buffer.concat([file(), end]), contentType: 'multipart/form-data' };
    case 8:
      notes.push('multipart: odd file name');
      return {
        body: Buffer.concat([file('file', rng.pick([...UNICODE, ...NASTY, huge(rng).slice(0, 5000)])), end]),
        contentType: ct,
      };
    case 9:
      notes.push('multipart: odd part content type');
      return {
        body: Buffer.concat([
          file('file', 'f.bin', rng.pick(['', 'x', 'image/svg+xml', 'text/html', huge(rng).slice(0, 3000)])),
          end,
        ]),
        contentType: ct,
      };
    case 10:
      notes.push('multipart: file over the upload limit');
      return {
        body: Buffer.concat([
          file('file', 'big.bin', 'application/octet-stream', Buffer.alloc(300 * 1024, 7)),
          end,
        ]),
        contentType: ct,
      };
    case 11:
      notes.push('multipart: part without disposition');
      return { body: Buffer.concat([part('Content-Type: text/plain', 'x'), end]), contentType: ct };
    case 12:
      notes.push('multipart: many parts');
      return {
        body: Buffer.concat([
          ...Array.from({ length: 200 }, (_, i) => part(`Content-Disposition: form-data; name="f${i}"`, 'v')),
          file(),
          end,
        ]),
        contentType: ct,
      };
    default:
      notes.push('multipart: garbage');
      return { body: Buffer.from(huge(rng).slice(0, 10_000)), contentType: ct };
  }
}

// --- requests --------------------------------------------------------------------------------------

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=nonsense',
  'application/jsonx',
  'application/vnd.api+json',
  'text/plain',
  'text/html',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=',
  'application/octet-stream',
  '',
  ';;;',
  '*/*',
  'application/json; boundary=x; charset=utf-8; a=b; a=c',
];

const IMAGE_PARAMS: Record<string, () => string[]> = {
  w: () => ['0', '1', '64', '8192', '8193', '-1', '1.5', 'abc', '99999999999999999999'],
  h: () => ['0', '1', '64', '8192', '8193', '-1', '1e3', ''],
  q: () => ['1', '50', '100', '0', '101', 'x'],
  b: () => ['0.3', '1', '1000', '0.2', '1001', 'NaN', 'Infinity'],
  r: () => ['0', '5', 'full', '-1', '1.5', 'round'],
  f: () => ['webp', 'png', 'jpeg', 'avif', 'auto', 'gif', 'tiff', 'svg', ''],
};

const PROVIDERS = [
  'github',
  'google',
  'facebook',
  'twitter',
  'linkedin',
  'apple',
  'windowslive',
  'spotify',
  'oidc',
];

function enc(s: string): string {
  // encodeURIComponent refuses lone surrogates; send their replacement bytes instead.
  try {
    return encodeURIComponent(s);
  } catch {
    return encodeURIComponent((s as string & { toWellFormed(): string }).toWellFormed());
  }
}

/** A storage path: the user's own files mostly, someone else's, the public area, or garbage. */
function storagePath(
  rng: Rng,
  user: FuzzUser | undefined,
  other: FuzzUser | undefined,
  notes: string[],
): string {
  const roll = rng.int(10);
  if (roll < 4 && user && user.files.length > 0) return rng.pick(user.files);
  if (roll < 6 && user)
    return `user/${user.userId}/${rng.pick(['', `${alnum(6, rng)}.txt`, 'sub/dir/x.bin', `${alnum(4, rng)}/`])}`;
  if (roll < 7 && other && other.files.length > 0) return rng.pick(other.files);
  if (roll < 8) return `public/${rng.pick(['', 'a.txt', `${alnum(6, rng)}.png`])}`;
  notes.push('garbage path');
  return rng.pick([
    '',
    '/',
    '//',
    '..',
    'user/../public/a',
    'user/%2e%2e/x',
    'user/%2F%2F',
    `user/${'a'.repeat(5000)}`,
    `user/${user?.userId ?? 'x'}/${'b/'.repeat(300)}`,
    'user/%00/x',
    'user/%0a/x',
    'user/%ff%fe/x',
    `user/${enc(rng.pick(UNICODE))}`,
    `${enc(rng.pick(NASTY))}/x`,
    'user/x/%',
    'public/a%20b',
    'user/x/file.txt?w=10',
  ]);
}

export interface Generated {
  request: FuzzRequest;
  /** The user whose credentials were used, if any. */
  user?: FuzzUser;
}

/** One request for `op`: mostly valid, mutated in one or several places. */
export async function generate(op: Operation, world: World, rng: Rng): Promise<Generated> {
  const notes: string[] = [];
  const users = world.users();
  const user = users.length > 0 ? rng.pick(users) : undefined;
  const other = users.length > 1 ? rng.pick(users) : undefined;
  const headers: [string, string][] = [];

  // Credentials: own valid token, none, another user's, forged, the admin secret, a cookie.
  const cred = rng.int(20);
  if (cred < 9 && user) {
    headers.push(['authorization', `Bearer ${user.jwt}`]);
    notes.push('own token');
  } else if (cred < 10 && other) {
    headers.push(['authorization', `Bearer ${other.jwt}`]);
    notes.push("another user's token");
  } else if (cred < 12) {
    const jwt = user?.jwt ?? 'a.b.c';
    const [h, p] = jwt.split('.');
    headers.push([
      'authorization',
      rng.pick([
        'Bearer',
        'Bearer ',
        'Bearer a.b.c',
        `Bearer ${h}.${p}.`,
        `Bearer ${h}.${Buffer.from('{"sub":1,"https://hasura.io/jwt/claims":[]}').toString('base64url')}.x`,
        `Bearer ${'a'.repeat(8000)}`,
        `Basic ${Buffer.from('a:b').toString('base64')}`,
        `bearer ${jwt}`,
        `Bearer ${jwt} ${jwt}`,
      ]),
    ]);
    notes.push('forged authorization');
  } else if (cred < 14) {
    headers.push([
      'x-admin-secret',
      rng.chance(0.7) ? world.adminSecret : rng.pick(['', 'wrong', huge(rng).slice(0, 5000)]),
    ]);
    notes.push('admin secret');
  } else if (cred < 15) {
    const c = world.cookie();
    if (c) {
      headers.push(['cookie', rng.chance(0.8) ? c : `${c.slice(0, -3)}xyz`]);
      notes.push('session cookie');
    }
  } else if (cred < 16) {
    headers.push([
      'cookie',
      rng.pick([
        'refresh_token=abc',
        'a=b; a=c',
        `x=${'y'.repeat(6000)}`,
        '=',
        ';;;',
        'refresh_token=s%3Aabc.def',
      ]),
    ]);
    notes.push('garbage cookie');
  }
  if (user && !headers.some(([k]) => k === 'x-admin-secret') && rng.chance(0.05)) {
    headers.push(['x-admin-secret', world.adminSecret]);
  }

  // Values of the kind real clients send, by field name.
  const hint: Hint = (field) => {
    if (!user || rng.chance(0.3)) return undefined;
    switch (field) {
      case 'email':
        return rng.chance(0.5) ? user.email : undefined;
      case 'password':
      case 'old_password':
        return user.password;
      case 'refresh_token':
        return user.refreshToken;
      case 'provider':
        return rng.pick(PROVIDERS);
      case 'redirect_to':
        return rng.pick([...world.origins, 'https://evil.example/', 'javascript:alert(1)', '//evil.example']);
      case 'cookie':
        return rng.chance(0.5);
      default:
        return IMAGE_PARAMS[field] ? rng.pick(IMAGE_PARAMS[field]()) : undefined;
    }
  };

  // Path.
  let path = op.path;
  for (const p of op.params.filter((x) => x.in === 'path')) {
    const value =
      p.name === '*'
        ? storagePath(rng, user, other, notes)
        : enc(
            String(
              rng.chance(0.8)
                ? validValue(p.schema, rng, p.name, (f) =>
                    f === 'provider' ? rng.pick(PROVIDERS) : undefined,
                  )
                : mutatedValue(p.schema, rng),
            ),
          );
    path = path.replace(p.name === '*' ? '{*}' : `{${p.name}}`, value);
  }

  // Query.
  const query: string[] = [];
  for (const p of op.params.filter((x) => x.in === 'query')) {
    if (!rng.chance(p.name === 'state' ? 0.8 : 0.5)) continue;
    let value: unknown;
    if (p.name === 'state' && rng.chance(0.5)) {
      value = await world.providerState(op.path.includes('{provider}') ? (path.split('/')[3] ?? '') : '');
      if (value !== undefined) notes.push('live provider state');
    }
    if (value === undefined) value = someValue(p.schema, rng, p.name, hint);
    const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
    query.push(`${p.name}=${enc(text)}`);
    if (rng.chance(0.05)) query.push(`${p.name}=${enc(text)}`);
  }
  if (rng.chance(0.1)) {
    query.push(
      rng.pick([
        'surprise=1',
        '%zz=1',
        'a[b]=c',
        'a[__proto__][x]=1',
        '=',
        '&&',
        `q=${'x'.repeat(9000)}`,
        'token',
      ]),
    );
    notes.push('odd query');
  }
  let url = query.length > 0 ? `${path}?${query.join('&')}` : path;

  // Body.
  let method = op.method;
  let body: Buffer | undefined;
  let contentType: string | undefined;
  if (op.multipart) {
    const m = multipartBody(rng, notes);
    body = m.body;
    contentType = m.contentType;
  } else if (op.body) {
    if (rng.chance(0.08)) {
      notes.push('no body');
    } else {
      body = Buffer.from(jsonBody(op.body, rng, hint, notes).text);
      contentType = 'application/json';
    }
  } else if (rng.chance(0.08)) {
    body = Buffer.from('{"unexpected": true}');
    contentType = 'application/json';
    notes.push('body where none is expected');
  }
  if (rng.chance(0.12)) {
    contentType = rng.pick([...CONTENT_TYPES, huge(rng).slice(0, 4000)]);
    notes.push(`content-type ${JSON.stringify(contentType.slice(0, 60))}`);
  }
  if (contentType !== undefined) headers.push(['content-type', contentType]);

  // Other headers real clients and attackers send.
  if (rng.chance(0.25)) {
    const extra = rng.pick<[string, string]>([
      ['origin', rng.pick([...world.origins, 'https://evil.example', 'null', ''])],
      [
        'range',
        rng.pick([
          'bytes=0-',
          'bytes=0-3',
          'bytes=-5',
          'bytes=5-2',
          'bytes=0-1,3-4',
          'bytes=99999999-',
          'bytes=x',
          'items=0-1',
          'bytes=-0',
        ]),
      ],
      ['if-none-match', rng.pick(['*', '"abc"', 'W/"x"', '', huge(rng).slice(0, 3000)])],
      [
        'if-modified-since',
        rng.pick(['Thu, 01 Jan 1970 00:00:00 GMT', 'yesterday', '', 'Sat, 01 Jan 10000 00:00:00 GMT']),
      ],
      ['if-match', '"nope"'],
      ['x-forwarded-for', rng.pick(['1.2.3.4', '::1', 'garbage', '1.2.3.4, 5.6.7.8', '', '999.999.999.999'])],
      ['x-request-id', rng.pick(['abc', 'a b', huge(rng).slice(0, 3000), '../../x'])],
      ['accept-encoding', rng.pick(['gzip', 'br', 'identity;q=0', '*;q=0', 'x'])],
      ['accept', rng.pick(['application/json', 'text/html', '*/*', 'nonsense', ''])],
      ['access-control-request-method', rng.pick(['POST', 'DELETE', 'X'])],
      ['expect', '100-continue'],
      ['x-http-method-override', 'DELETE'],
      ['content-encoding', rng.pick(['gzip', 'deflate', 'br', 'nonsense'])],
      ['accept-language', rng.pick(['fr', 'de-DE,de;q=0.9', '*', huge(rng).slice(0, 2000)])],
    ]);
    headers.push(extra);
    notes.push(`header ${extra[0]}`);
  }
  if (rng.chance(0.03)) {
    const huger = 'h'.repeat(rng.pick([8_000, 20_000, 70_000]));
    headers.push(['x-large', huger]);
    notes.push(`header of ${huger.length} bytes`);
  }
  if (rng.chance(0.04)) {
    // A unicode header value goes out as its UTF-8 bytes (read as latin1 by the server).
    headers.push([
      'x-unicode',
      Buffer.from(rng.pick(UNICODE).replace(/[\r\n\0]/g, ''), 'utf8').toString('latin1'),
    ]);
  }
  if (op.method === 'GET' && rng.chance(0.05)) {
    method = 'HEAD';
    notes.push('HEAD');
  }

  for (const h of headers) h[1] = headerValue(h[1]);
  const request: FuzzRequest = { method, url, headers, body, notes };
  // Malformed HTTP, sent over a raw socket.
  if (rng.chance(0.04)) {
    url = rng.pick([
      `${path}/${rng.pick(UNICODE).replace(/[\r\n\0]/g, '')}`,
      `${path} x`,
      `${path}?a=${'\u00e9'}`,
      `${path}#fragment`,
      'http://127.0.0.1/health',
      '*',
    ]);
    const len = body?.length ?? 0;
    const head = rng.pick([
      `${method} ${url} HTTP/1.1\r\nHost: x\r\n`,
      `${method} ${request.url} HTTP/1.1\r\nHost: x\r\nContent-Length: ${len + 10}\r\n`,
      `${method} ${request.url} HTTP/1.1\r\nHost: x\r\nContent-Length: ${len}\r\nTransfer-Encoding: chunked\r\n`,
      `${method} ${request.url} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n`,
      `${method} ${request.url} HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n`,
      `${method} ${request.url} HTTP/1.0\r\n`,
      `${method} ${request.url} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
      `${method}  ${request.url}  HTTP/1.1\r\n`,
      `${method} ${request.url} HTTP/9.9\r\nHost: x\r\n`,
    ]);
    request.raw = { head, body };
    notes.push('raw HTTP');
  }
  return { request, user };
}

/**
 * A header value as it travels: what is not Latin-1 goes as its UTF-8 bytes (node's client refuses other
 * characters), and the control characters HTTP forbids are left out (those go over a raw socket).
 */
function headerValue(v: string): string {
  let out = '';
  for (const ch of Buffer.from(v, 'utf8').toString('latin1')) {
    const c = ch.charCodeAt(0);
    if (c === 9 || (c >= 32 && c !== 127)) out += ch;
  }
  return out;
}

// --- sending and checking --------------------------------------------------------------------------

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const MAX_BODY = 256 * 1024;

/** Sends a request and reads its answer (the first 256 KiB of the body). */
export function send(base: string, req: FuzzRequest, agent: Agent, timeoutMs = 30_000): Promise<Answer> {
  const target = new URL(base);
  if (req.raw) return sendRaw(target, req, timeoutMs);
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        // As an array of raw pairs (so that repeated and odd headers go out as given), which makes node
        // leave out the Host header it would add itself.
        headers: [
          'host',
          target.host,
          ...req.headers.flat(),
          ...(req.body ? ['content-length', String(req.body.length)] : []),
        ],
        agent,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < MAX_BODY) chunks.push(c);
          size += c.length;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    r.on('timeout', () => r.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    r.on('error', reject);
    r.end(req.body);
  });
}

function sendRaw(target: URL, req: FuzzRequest, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    socket.on('connect', () => {
      const raw = req.raw as { head?: string; body?: Buffer };
      const head = raw.head ?? '';
      const extra = head.includes('\r\n\r\n') ? '' : 'Connection: close\r\n\r\n';
      socket.end(Buffer.concat([Buffer.from(head + extra, 'latin1'), raw.body ?? Buffer.alloc(0)]));
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // The server may close a connection it refused before we finish writing.
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') finish();
      else reject(err);
    });
    socket.on('close', () => finish());
    let done = false;
    function finish() {
      if (done) return;
      done = true;
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      const headText = all.subarray(0, end < 0 ? all.length : end).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(headText);
      const headers: Record<string, string> = {};
      for (const line of headText.split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      // 0: the connection closed without an answer (a refusal Node makes for some malformed requests).
      resolve({
        status: m ? Number(m[1]) : 0,
        headers,
        body: end < 0 ? Buffer.alloc(0) : all.subarray(end + 4),
      });
    }
  });
}

/** What is wrong with an answer, or undefined when it keeps the rules. */
export function violation(req: FuzzRequest, answer: Answer): string | undefined {
  if (answer.status >= 500) {
    // The one 5xx the contract prescribes: GET /auth/jwks with a shared-secret (HS*) key (HBP's 501).
    const documented = answer.status === 501 && req.url.startsWith('/auth/jwks');
    // Readiness answers 503 when a check takes over 2 s, which a machine loaded enough can cause without
    // any fault; the suites check readiness again once the load is over.
    const slowReady = answer.status === 503 && req.url.startsWith('/health/ready');
    if (!documented && !slowReady) return `answered ${answer.status}`;
  }
  if (answer.status < 400 || req.method === 'HEAD' || answer.status === 0) return undefined;
  if (req.raw && answer.headers['transfer-encoding'] === 'chunked') return undefined;
  let body: { statusCode?: unknown; code?: unknown; message?: unknown; error?: unknown };
  try {
    body = JSON.parse(answer.body.toString('utf8'));
  } catch {
    return `a ${answer.status} without the JSON error body: ${answer.body.toString('utf8').slice(0, 200)}`;
  }
  if (body.statusCode !== answer.status) return `error body says statusCode ${String(body.statusCode)}`;
  if (typeof body.message !== 'string' || typeof body.error !== 'string')
    return 'error body without message or error';
  if (typeof body.code !== 'string' || !(body.code in ERRORS))
    return `error code ${String(body.code)} is not in the catalogue`;
  return undefined;
}

/** A request, described for a failure report (long values cut). */
export function describe(req: FuzzRequest): string {
  const cut = (s: string) => (s.length > 300 ? `${s.slice(0, 300)}…(${s.length} chars)` : s);
  const lines = [`${req.method} ${cut(req.url)}${req.raw ? ' [raw]' : ''}  (${req.notes.join(', ')})`];
  for (const [k, v] of req.headers)
    lines.push(`  ${k}: ${cut(k === 'authorization' || k === 'x-admin-secret' ? v.slice(0, 20) : v)}`);
  if (req.raw?.head) lines.push(`  raw head: ${JSON.stringify(cut(req.raw.head))}`);
  if (req.body) lines.push(`  body: ${JSON.stringify(cut(req.body.toString('utf8')))}`);
  return lines.join('\n');
}
