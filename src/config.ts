/**
 * Every setting of the service, declared once: its environment name (HBP's names and legacy aliases
 * included), its type, its default and one line of documentation. `loadConfig` parses the whole
 * environment in one pass and reports every problem at once; nothing else reads `process.env`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { kebabCase, RESERVED_CLAIMS } from './auth/claim-names.ts';
import { JWT_ALGORITHMS, keySettingProblems } from './auth/key-material.ts';
import { parseUrlPattern } from './http/url-patterns.ts';
import { WEBHOOK_EVENT_TYPES } from './webhooks/event-types.ts';

export { JWT_ALGORITHMS, type JwtAlgorithm } from './auth/key-material.ts';

type Env = Record<string, string | undefined>;
type Partial = Record<string, unknown>;

interface Setting<T> {
  /** Section heading in the documentation. */
  group: string;
  doc: string;
  /** Older names accepted for the same setting (HBP's `*_ENABLE` spellings). */
  aliases?: readonly string[];
  /** Value when unset; a function sees the settings declared before this one. */
  default: T | ((c: Partial) => T);
  /** How the default is shown in the documentation when it is computed. */
  defaultDoc?: string;
  parse(raw: string): T;
  /** Secrets are never printed. */
  secret?: boolean;
}

class Invalid extends Error {}

/** A setting whose computed default is documented as `doc` (Markdown) instead of its value on this machine. */
function shownAs<T>(setting: Setting<T>, doc: string): Setting<T> {
  return { ...setting, defaultDoc: doc };
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

function bool(
  group: string,
  def: boolean | ((c: Partial) => boolean),
  doc: string,
  aliases?: string[],
): Setting<boolean> {
  return {
    group,
    doc,
    default: def,
    aliases,
    parse(raw) {
      const v = raw.trim().toLowerCase();
      if (TRUE.has(v)) return true;
      if (FALSE.has(v)) return false;
      throw new Invalid(`must be true or false, got "${raw}"`);
    },
  };
}

function int(
  group: string,
  def: number | ((c: Partial) => number),
  doc: string,
  range: { min?: number; max?: number; aliases?: string[] } = {},
): Setting<number> {
  return {
    group,
    doc,
    default: def,
    aliases: range.aliases,
    parse(raw) {
      const v = raw.trim();
      if (!/^-?\d+$/.test(v)) throw new Invalid(`must be a whole number, got "${raw}"`);
      const n = Number(v);
      if (!Number.isSafeInteger(n)) throw new Invalid(`is out of range, got "${raw}"`);
      if (range.min !== undefined && n < range.min)
        throw new Invalid(`must be at least ${range.min}, got ${n}`);
      if (range.max !== undefined && n > range.max)
        throw new Invalid(`must be at most ${range.max}, got ${n}`);
      return n;
    },
  };
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** A byte size: `1048576`, `512k`, `100MB`, `1GiB` (binary multiples). */
function bytes(group: string, def: number, doc: string): Setting<number> {
  return {
    group,
    doc,
    default: def,
    parse(raw) {
      const n = parseSize(raw);
      if (n === undefined) throw new Invalid(`must be a size such as 1048576, 512KB or 1GiB, got "${raw}"`);
      return n;
    },
  };
}

/** A size such as 1048576, 512KB or 1GiB (units of 1024); undefined when it is none. */
export function parseSize(raw: string): number | undefined {
  const m = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(raw);
  const unit = SIZE_UNITS[(m?.[2] ?? '').toLowerCase()];
  if (!m || unit === undefined) return undefined;
  const n = Number(m[1]) * unit;
  return Number.isSafeInteger(n) ? n : undefined;
}

/** A size, or `unlimited` (null, also the default). */
function sizeOrUnlimited(group: string, doc: string): Setting<number | null> {
  return {
    group,
    doc,
    default: null,
    defaultDoc: 'unlimited',
    parse(raw) {
      if (raw.trim().toLowerCase() === 'unlimited') return null;
      const n = parseSize(raw);
      if (n === undefined)
        throw new Invalid(`must be a size such as 1073741824, 500MB or 10GiB, or "unlimited", got "${raw}"`);
      return n;
    },
  };
}

function str(
  group: string,
  def: string | ((c: Partial) => string),
  doc: string,
  opts: { secret?: boolean; aliases?: string[] } = {},
): Setting<string> {
  return { group, doc, default: def, secret: opts.secret, aliases: opts.aliases, parse: (raw) => raw };
}

function list(group: string, def: string[] | ((c: Partial) => string[]), doc: string): Setting<string[]> {
  return {
    group,
    doc,
    default: def,
    parse: (raw) =>
      raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
  };
}

function oneOf<const T extends string>(
  group: string,
  values: readonly T[],
  def: T,
  doc: string,
  caseInsensitive = false,
): Setting<T> {
  return {
    group,
    doc: `${doc} One of: ${values.join(', ')}.`,
    default: def,
    parse(raw) {
      const v = raw.trim();
      const found = values.find((x) => (caseInsensitive ? x.toLowerCase() === v.toLowerCase() : x === v));
      if (!found) throw new Invalid(`must be one of ${values.join(', ')}, got "${raw}"`);
      return found;
    },
  };
}

function url(
  group: string,
  doc: string,
  protocols: string[],
  opts: { secret?: boolean } = {},
): Setting<string> {
  return {
    group,
    doc,
    default: '',
    secret: opts.secret,
    parse(raw) {
      const v = raw.trim();
      if (v === '') return '';
      let u: URL;
      try {
        u = new URL(v);
      } catch {
        throw new Invalid('is not a valid URL');
      }
      if (!protocols.includes(u.protocol))
        throw new Invalid(`must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
      return v;
    },
  };
}

/** What `TRUST_PROXY` parses to: no proxy, every peer, the nearest n hops, or proxy-addr addresses. */
export type TrustProxy = boolean | number | readonly string[];

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** One entry of a proxy list in proxy-addr's syntax: an address, a CIDR (or IPv4 netmask) or a name. */
function proxyEntryValid(entry: string): boolean {
  if (PROXY_NAMES.has(entry)) return true;
  const [addr = '', bits, ...rest] = entry.split('/');
  const family = isIP(addr);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  if (/^\d+$/.test(bits)) return Number(bits) <= (family === 4 ? 32 : 128);
  return family === 4 && isIP(bits) === 4;
}

function trustProxy(group: string, doc: string): Setting<TrustProxy> {
  return {
    group,
    doc,
    default: false,
    parse(raw) {
      const v = raw.trim().toLowerCase();
      if (TRUE.has(v)) return true;
      if (FALSE.has(v)) return false;
      if (/^\d+$/.test(v)) return Number(v);
      const entries = raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      const bad = entries.filter((e) => !proxyEntryValid(e));
      if (bad.length > 0)
        throw new Invalid(
          `must be false, true, a hop count, or the proxies' addresses or CIDRs (such as 10.0.0.0/8, loopback); "${bad.join('", "')}" is none of these`,
        );
      return entries;
    },
  };
}

/** The host name of a URL (no port), or '' when it is not one. */
function hostOf(raw: string): string {
  try {
    return new URL(raw).hostname;
  } catch {
    return '';
  }
}

/** The origin of an http(s) URL, or undefined. */
function originOf(raw: string): string | undefined {
  try {
    const u = new URL(raw);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/** WEBAUTHN_ORIGINS: exact http(s) origins, compared as browsers write them in clientDataJSON. */
function parseOrigins(raw: string): string[] {
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const bad = entries.filter((e) => originOf(e)?.toLowerCase() !== e.replace(/\/$/, '').toLowerCase());
  if (bad.length > 0)
    throw new Invalid(
      `must list origins such as https://app.example.com (scheme, host and port only); "${bad.join('", "')}" is not one`,
    );
  return entries.map((e) => originOf(e) as string);
}

const APP = 'Application';
const AUTH = 'Auth features';
const REG = 'Registration and passwords';
const JWT = 'Tokens and sessions';
const COOKIES = 'Cookies';
const LIMITS = 'Rate limits';
const MAIL = 'Email';
const STORAGE = 'Storage';
const IMAGES = 'Image transformation';
const OPS = 'Operations (metrics, console)';
const OAUTH = 'OAuth and OpenID Connect sign-in';
const HOOKS = 'Custom claims and webhooks';
const PASSKEYS = 'Passkeys (WebAuthn)';

// --- OAuth and OpenID Connect providers (issue 19): helpers of the settings block at the end of SETTINGS ---

/** A URL setting with a default (a provider endpoint); http(s) only. */
function endpoint(doc: string, def: string, aliases?: string[]): Setting<string> {
  return { ...url(OAUTH, doc, ['http:', 'https:']), default: def, aliases };
}

/**
 * The settings of an OAuth 2.0 provider: HBP's `<NAME>_ENABLED` (with `<NAME>_ENABLE`), client id and
 * secret, and its endpoints (defaults: the provider's public ones; set them for a self-hosted variant).
 * `legacy` is another spelling HBP's documentation used (WINDOWSLIVE_ for WINDOWS_LIVE_).
 */
function oauth2Settings<N extends string>(
  name: N,
  label: string,
  endpoints: { authorization: string; token: string; profile: string },
  legacy?: string,
): Record<`${N}_ENABLED`, Setting<boolean>> &
  Record<
    `${N}_${'CLIENT_ID' | 'CLIENT_SECRET' | 'AUTHORIZATION_URL' | 'TOKEN_URL' | 'USER_PROFILE_URL'}`,
    Setting<string>
  > {
  const alias = (suffix: string) => (legacy ? [`${legacy}_${suffix}`] : []);
  return {
    [`${name}_ENABLED`]: bool(
      OAUTH,
      false,
      `Sign-in with ${label} at \`/auth/providers/${label.toLowerCase().replace(/\s/g, '')}\`.`,
      [`${name}_ENABLE`, ...alias('ENABLED'), ...alias('ENABLE')],
    ),
    [`${name}_CLIENT_ID`]: str(OAUTH, '', `${label} OAuth client id.`, { aliases: alias('CLIENT_ID') }),
    [`${name}_CLIENT_SECRET`]: str(OAUTH, '', `${label} OAuth client secret.`, {
      secret: true,
      aliases: alias('CLIENT_SECRET'),
    }),
    [`${name}_AUTHORIZATION_URL`]: endpoint(
      `${label} authorization endpoint.`,
      endpoints.authorization,
      alias('AUTHORIZATION_URL'),
    ),
    [`${name}_TOKEN_URL`]: endpoint(`${label} token endpoint.`, endpoints.token, alias('TOKEN_URL')),
    [`${name}_USER_PROFILE_URL`]: endpoint(
      `${label} profile endpoint (read with the access token).`,
      endpoints.profile,
      alias('USER_PROFILE_URL'),
    ),
  } as never;
}

/** The settings of a provider reached through OpenID Connect discovery at `<NAME>_ISSUER`. */
function oidcSettings<N extends string>(
  name: N,
  label: string,
  issuer: string,
): Record<`${N}_ENABLED`, Setting<boolean>> &
  Record<`${N}_${'CLIENT_ID' | 'CLIENT_SECRET' | 'ISSUER'}`, Setting<string>> {
  return {
    [`${name}_ENABLED`]: bool(
      OAUTH,
      false,
      `Sign-in with ${label} at \`/auth/providers/${label.toLowerCase()}\`.`,
      [`${name}_ENABLE`],
    ),
    [`${name}_CLIENT_ID`]: str(OAUTH, '', `${label} OAuth client id.`),
    [`${name}_CLIENT_SECRET`]: str(OAUTH, '', `${label} OAuth client secret.`, { secret: true }),
    [`${name}_ISSUER`]: endpoint(
      `${label}'s OpenID Connect issuer; its endpoints and keys are read from \`<issuer>/.well-known/openid-configuration\`.`,
      issuer,
    ),
  } as never;
}

/** The settings table. Order matters only for computed defaults (they see earlier entries). */
const SETTINGS = {
  // --- application ---
  NODE_ENV: str(
    APP,
    'development',
    '`production` refuses development-only settings (generated keys, embedded database, short secrets) and makes cookies `Secure` by default.',
  ),
  HOST: shownAs(
    str(
      APP,
      (c) => (c.NODE_ENV === 'production' ? '0.0.0.0' : '127.0.0.1'),
      'Interface to listen on. Outside production only this machine can connect (`127.0.0.1`); set `0.0.0.0` (every IPv4 interface) or `::` to accept other machines, as production does by default (HBP: every interface always).',
    ),
    '`127.0.0.1`; `0.0.0.0` in production',
  ),
  PORT: int(APP, 3000, 'Port to listen on.', { min: 0, max: 65535 }),
  SERVER_URL: shownAs(
    str(
      APP,
      (c) => `http://localhost:${c.PORT}`,
      'Public base URL of this service, used in email links.',
      {},
    ),
    '`http://localhost:<PORT>` (`http://localhost:3000`)',
  ),
  DATA_DIR: str(
    APP,
    './data',
    'Folder for embedded state: `db/` (PGlite), `storage/` (local files), `outbox/` (development emails), generated keys. Its folders are created 0700 and its files 0600, whatever the umask; wider modes found at start are tightened with a warning (give it a folder of its own: the root, home, temporary and working folders are left alone).',
  ),
  CUSTOM_DIR: str(
    APP,
    './custom',
    "HBP's `custom/` folder: `keys/private.pem`, `emails/`, `storage-rules/rules.yaml`.",
  ),
  DATABASE_URL: url(
    APP,
    'PostgreSQL connection string. Unset: embedded PGlite in `DATA_DIR/db`.',
    ['postgres:', 'postgresql:'],
    { secret: true },
  ),
  DATABASE_POOL_SIZE: int(APP, 10, 'Maximum PostgreSQL connections per instance.', { min: 1, max: 1000 }),
  REDIS_URL: url(
    APP,
    'Redis for shared rate-limit counters across instances. Unset: counters in memory.',
    ['redis:', 'rediss:'],
    { secret: true },
  ),
  LOG_LEVEL: oneOf(
    APP,
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
    'info',
    'Log level. At every level, secrets stay out of the log: request URLs are logged with secret query values (tokens, tickets, codes, state, passwords) replaced by `[redacted]`, headers and bodies are never logged, errors without what they carried.',
  ),
  REDIRECT_URL_SUCCESS: str(
    APP,
    '',
    'Where activation and magic links redirect on success (`refresh_token` is appended).',
  ),
  REDIRECT_URL_ERROR: str(
    APP,
    '',
    'Where activation and magic links redirect on failure. Unset: answer 401.',
  ),
  ALLOWED_REDIRECT_URLS: list(
    APP,
    [],
    'Extra redirect targets a client may ask for with `redirect_to`: origins (`https://app.example.com`, any page there) or URLs with a path (`https://app.example.com/auth/*`). `*` stands for whole subdomain labels (`https://*.example.com`: any depth), part of one label, any port (`http://localhost:*`) or a run of path characters; never for `/`, `?`, `#`, `@` or `:` (docs/security.md).',
  ),
  CORS_ORIGINS: list(
    APP,
    [],
    'Origins allowed to call the API with credentials (`*` patterns as for `ALLOWED_REDIRECT_URLS`, without a path). Unset: any localhost origin outside production, none in production.',
  ),
  TRUST_PROXY: trustProxy(
    APP,
    'Proxies whose `X-Forwarded-For` (and `-Proto`, `-Host`) is believed, so that rate limits see the real client address: comma-separated addresses, CIDRs or `loopback`/`linklocal`/`uniquelocal` (such as `10.0.0.0/8`). A hop count `n` believes the nearest n hops whatever their address (only when nothing else can reach the service). `false`: the connecting address is the client. `true` (every peer) is refused in production.',
  ),
  BODY_LIMIT: bytes(APP, 1024 * 1024, 'Largest JSON body accepted (413 beyond).'),
  HASURA_ENDPOINT: str(
    APP,
    '',
    "GraphQL engine endpoint. When set, the auth tables and `public.users` are tracked there at start, with their relationships (HBP's metadata); Gatehouse itself talks to PostgreSQL directly.",
  ),
  HASURA_WEBHOOK_ANONYMOUS_ROLE: str(
    APP,
    '',
    "Role that `GET /auth/hasura` (the GraphQL engine's auth webhook, docs/hasura.md) gives a request without an access token. Empty: such a request gets 401.",
  ),
  HASURA_GRAPHQL_ADMIN_SECRET: str(
    APP,
    '',
    'Admin secret: storage rule bypass and login impersonation (header `x-admin-secret`). Empty: no bypass. At least 32 characters in production; wrong guesses count against `RATE_LIMIT_IP_FAILURES_MAX`.',
    { secret: true },
  ),

  ADMIN_ROLE: str(
    APP,
    '',
    "Role whose access tokens may call the admin API (`/admin`, docs/admin.md) and open the console's admin pages, as the admin secret does. Empty: only the admin secret. Must not be a role a new account gets or may ask for (`DEFAULT_USER_ROLE`, `DEFAULT_ALLOWED_USER_ROLES`, `ALLOWED_USER_ROLES`, `DEFAULT_ANONYMOUS_ROLE`); an operator grants it (`PATCH /admin/users/{id}` or `gatehouse users set-role`).",
  ),

  // --- auth features ---
  AUTH_ENABLED: bool(AUTH, true, 'Every `/auth` route (404 when false).', ['AUTH_ENABLE']),
  AUTH_LOCAL_USERS_ENABLED: bool(AUTH, true, 'Email and password accounts (accepted for compatibility).', [
    'AUTH_LOCAL_USERS_ENABLE',
  ]),
  CHANGE_EMAIL_ENABLED: bool(AUTH, true, '`/auth/change-email*` routes.', ['CHANGE_EMAIL_ENABLE']),
  NOTIFY_EMAIL_CHANGE: bool(
    AUTH,
    true,
    'Email the old address after an email change (direct or confirmed), so the owner learns of a takeover. Off only if you tell the owner another way (HBP: off).',
  ),
  NOTIFY_NEW_SIGN_IN: bool(
    AUTH,
    true,
    'Email the owner when their account is signed in from a device not seen on it in the last 90 days (browser family and network), when emails are on. The email has no link that signs in.',
  ),
  SECURITY_EVENTS_RETENTION_DAYS: int(
    AUTH,
    90,
    'Days an event of the security feed (`GET /auth/security-events`, `auth.security_events`) is kept.',
    { min: 1 },
  ),
  ANONYMOUS_USERS_ENABLED: bool(AUTH, false, '`POST /auth/login` with `anonymous: true`.', [
    'ANONYMOUS_USERS_ENABLE',
  ]),
  ALLOW_USER_SELF_DELETE: bool(AUTH, false, '`POST /auth/delete`.'),
  VERIFY_EMAILS: bool(AUTH, false, 'Email changes are confirmed by a ticket sent to the new address.'),
  LOST_PASSWORD_ENABLED: bool(AUTH, false, '`/auth/change-password/request` and `/change`.', [
    'LOST_PASSWORD_ENABLE',
  ]),
  USER_IMPERSONATION_ENABLED: bool(AUTH, false, 'Admin login as any user with `x-admin-secret`.', [
    'USER_IMPERSONATION_ENABLE',
  ]),
  MAGIC_LINK_ENABLED: bool(
    AUTH,
    false,
    'Password-less register and login by emailed link; gates `/auth/magic-link`.',
    ['MAGIC_LINK_ENABLE'],
  ),
  MAGIC_LINK_EXPIRES_IN: int(AUTH, 15, 'Lifetime of a magic-link token, in minutes.', { min: 1 }),
  MFA_ENABLED: bool(AUTH, true, '`/auth/mfa/*` routes (TOTP).', ['MFA_ENABLE']),
  OTP_ISSUER: str(AUTH, 'HBP', 'Issuer shown by authenticator apps.'),
  WEBAUTHN_ENABLED: shownAs(
    bool(
      PASSKEYS,
      (c) => c.NODE_ENV !== 'production' && isIP(hostOf(String(c.SERVER_URL)).replace(/^\[|\]$/g, '')) === 0,
      'Passkeys (WebAuthn): sign up, sign in and step up without a password, `/auth/passkeys/*` (docs/passkeys.md). In production it needs `WEBAUTHN_RP_ID` and `WEBAUTHN_ORIGINS`.',
    ),
    '`true` outside production when `SERVER_URL` names a host (browsers refuse passkeys on an IP address, so `http://127.0.0.1:…` leaves them off; use `http://localhost:…`); `false` in production',
  ),
  WEBAUTHN_RP_ID: shownAs(
    str(
      PASSKEYS,
      (c) => (c.NODE_ENV === 'production' ? '' : hostOf(String(c.SERVER_URL))),
      'The relying party id: the domain passkeys are bound to (`example.com` lets `app.example.com` and `example.com` use them). Passkeys made for one RP id never work for another: choose it once.',
    ),
    'the host of `SERVER_URL` outside production; unset in production',
  ),
  WEBAUTHN_RP_NAME: str(PASSKEYS, 'Gatehouse', 'The service name an authenticator shows beside a passkey.'),
  WEBAUTHN_ORIGINS: shownAs(
    {
      ...list(
        PASSKEYS,
        (c) => {
          const origin = originOf(String(c.SERVER_URL));
          return origin === undefined ? [] : [origin];
        },
        'Comma-separated exact origins (`https://app.example.com`, no path) whose pages may run a passkey ceremony: the `origin` of `clientDataJSON` must be one of them. Each must be the RP id or one of its subdomains.',
      ),
      parse: parseOrigins,
    },
    'the origin of `SERVER_URL`',
  ),
  WEBAUTHN_USER_VERIFICATION: oneOf(
    PASSKEYS,
    ['preferred', 'required'],
    'preferred',
    '`required`: refuse any passkey ceremony where the authenticator did not verify the person (PIN, biometrics). With `preferred`, a sign-in without it is one factor: an account with TOTP is asked for its code.',
  ),
  MFA_ENCRYPTION_KEY: str(
    AUTH,
    '',
    'Secret from which the key that encrypts TOTP secrets at rest is derived. Unset outside production: generated into `DATA_DIR`.',
    { secret: true },
  ),
  MFA_ENCRYPTION_PREVIOUS_KEYS: {
    ...list(
      AUTH,
      [],
      'Retired `MFA_ENCRYPTION_KEY` values (comma-separated): still decrypt, and secrets under them are re-encrypted with the current key at start.',
    ),
    secret: true,
  },
  RATE_LIMIT_MFA_ACCOUNT_MAX: int(
    LIMITS,
    10,
    'Wrong two-factor codes accepted per account per `RATE_LIMIT_MFA_ACCOUNT_WINDOW`; beyond, every code is refused (429) until the window ends.',
    { min: 1 },
  ),
  RATE_LIMIT_MFA_ACCOUNT_WINDOW: int(
    LIMITS,
    900_000,
    'Window of `RATE_LIMIT_MFA_ACCOUNT_MAX`, in milliseconds (15 minutes).',
    { min: 1 },
  ),

  // --- registration and passwords ---
  ALLOWED_EMAIL_DOMAINS: list(
    REG,
    [],
    'Email domains allowed to register (exact or dot-bounded subdomain). Unset: all.',
  ),
  DEFAULT_USER_ROLE: str(REG, 'user', 'Default role of new accounts.'),
  DEFAULT_ANONYMOUS_ROLE: str(REG, 'anonymous', 'Role of anonymous accounts.'),
  DEFAULT_ALLOWED_USER_ROLES: shownAs(
    list(REG, (c) => [String(c.DEFAULT_USER_ROLE)], 'Roles given to a new account that asks for none.'),
    'same as `DEFAULT_USER_ROLE` (`user`)',
  ),
  ALLOWED_USER_ROLES: shownAs(
    list(
      REG,
      (c) => [...(c.DEFAULT_ALLOWED_USER_ROLES as string[])],
      'Roles a new account may ask for in `register_options.allowed_roles`.',
    ),
    'same as `DEFAULT_ALLOWED_USER_ROLES` (`user`)',
  ),
  AUTO_ACTIVATE_NEW_USERS: bool(
    REG,
    true,
    'New accounts are active at once (tokens returned). false: an activation email is sent and no tokens are returned.',
  ),
  REGISTRATION_CUSTOM_FIELDS: list(
    REG,
    [],
    '`public.users` columns a client may set in `user_data` at registration.',
  ),
  MIN_PASSWORD_LENGTH: int(
    REG,
    8,
    'Shortest new password accepted (HBP default 3; 8 here, the NIST SP 800-63B floor). Only new passwords are measured (registration, change, reset): accounts with shorter ones, imported from HBP, still sign in. The longest is 128.',
    { min: 1, max: 128 },
  ),
  HIBP_ENABLED: bool(REG, false, 'Refuse passwords found in Have I Been Pwned (k-anonymity range query).', [
    'HIBP_ENABLE',
  ]),
  HIBP_ENDPOINT: str(REG, 'https://api.pwnedpasswords.com/range/', 'Pwned Passwords range API base URL.'),
  HIBP_FAIL_OPEN: bool(
    REG,
    true,
    'When the Pwned Passwords API cannot be reached: true accepts the password, false refuses it (503).',
  ),
  HIBP_TIMEOUT_MS: int(REG, 2000, 'Timeout of the Pwned Passwords request, in milliseconds.', { min: 1 }),
  ARGON2_MEMORY_COST: int(REG, 19456, 'argon2id memory in KiB (OWASP: 19456).', { min: 8 }),
  ARGON2_TIME_COST: int(REG, 2, 'argon2id iterations (OWASP: 2).', { min: 1 }),
  ARGON2_PARALLELISM: int(REG, 1, 'argon2id lanes (OWASP: 1).', { min: 1, max: 16 }),
  PASSWORD_HASH_THREADS: int(
    REG,
    0,
    'Threads that hash and check passwords (0: one per CPU core). They run at a lower CPU priority than request handling (nice 10), so requests are served first and logins share what is left.',
    { min: 0, max: 64 },
  ),
  PASSWORD_HASH_QUEUE: int(
    REG,
    0,
    'Password checks and hashes allowed to wait for a hashing thread (0: 64 per thread). Beyond that, login, registration and password changes get 503 `PASSWORD_HASHING_BUSY` with `Retry-After` at once instead of queueing.',
    { min: 0 },
  ),

  // --- tokens and sessions ---
  JWT_KEY: str(
    JWT,
    '',
    'HS* shared secret, or a PEM private key (RS*/ES*/EdDSA; `\\n` sequences allowed). Unset: read from `CUSTOM_DIR/keys/private.pem` if present, else (outside production) generated once into `DATA_DIR/keys`.',
    { secret: true },
  ),
  JWT_ALGORITHM: oneOf(JWT, JWT_ALGORITHMS, 'RS256', 'Access-token signing algorithm.'),
  JWT_PREVIOUS_KEY: str(
    JWT,
    '',
    'Key(s) retired by a rotation (RS*/ES256/EdDSA only): one or more PEM keys, private or public, of the same type as `JWT_KEY`. Tokens they signed still verify and their public halves stay in `/auth/jwks`, until `JWT_KEY_ROTATED_AT` + `JWKS_MAX_AGE` + `JWT_EXPIRES_IN` when that is set, else until removed. Unset with keys from files: `<key file stem>.previous.pem` beside the key file, written by `gatehouse keys rotate`.',
    { secret: true },
  ),
  JWT_KEY_ROTATED_AT: {
    group: JWT,
    doc: 'When `JWT_KEY` replaced `JWT_PREVIOUS_KEY` (ISO 8601, such as `2025-01-31T12:00:00Z`). Until `JWKS_MAX_AGE` seconds later a private previous key still signs, so that verifiers whose cached JWKS does not hold the new key yet keep accepting new tokens; `JWT_EXPIRES_IN` after that the previous key is dropped. Unset: the new key signs at once.',
    default: '',
    parse(raw: string): string {
      const v = raw.trim();
      if (
        !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(v) ||
        Number.isNaN(Date.parse(v))
      )
        throw new Invalid(
          `must be an ISO 8601 instant with its zone, such as 2025-01-31T12:00:00Z, got "${raw}"`,
        );
      return new Date(v).toISOString();
    },
  } satisfies Setting<string>,
  JWKS_MAX_AGE: int(
    JWT,
    300,
    '`Cache-Control: public, max-age` of `/auth/jwks`, in seconds: how long verifiers (Hasura refreshes its JWKS on this schedule) may keep the key set. After a rotation (`JWT_KEY_ROTATED_AT`) the new key starts signing this long after it is published.',
    { min: 0, max: 86_400 },
  ),
  JWT_CLAIMS_NAMESPACE: str(
    JWT,
    'https://hasura.io/jwt/claims',
    'Key of the Hasura claims object in the JWT.',
  ),
  JWT_ISSUER: str(JWT, 'nhost', 'The `iss` claim (HBP: nhost).'),
  JWT_EXPIRES_IN: int(
    JWT,
    15,
    'Access-token lifetime in minutes (`jwt_expires_in` is reported in milliseconds).',
    { min: 1 },
  ),
  JWT_REFRESH_EXPIRES_IN: int(JWT, 43200, 'Refresh-token lifetime in minutes (30 days).', { min: 1 }),
  JWT_CUSTOM_FIELDS: list(
    JWT,
    [],
    '`public.users` columns added to the claims as `x-hasura-<kebab-name>` strings.',
  ),
  REFRESH_TOKEN_REUSE_INTERVAL: int(
    JWT,
    10,
    'Seconds during which a just-rotated refresh token may be presented again (racing tabs) and gets a sibling; later reuse revokes the session.',
    { min: 0 },
  ),
  SENSITIVE_ACTION_WINDOW: int(
    JWT,
    300,
    'Seconds after a sign-in (not a refresh) during which the session may change the email, delete the account, turn MFA on or off, or set a first password without sending the current `password`. `0`: always ask for it.',
    { min: 0 },
  ),
  TICKET_ACTIVATION_EXPIRES_IN: int(JWT, 10080, 'Lifetime of an activation ticket, in minutes (7 days).', {
    min: 1,
  }),
  TICKET_PASSWORD_RESET_EXPIRES_IN: int(JWT, 60, 'Lifetime of a password-reset ticket, in minutes.', {
    min: 1,
  }),
  TICKET_EMAIL_CHANGE_EXPIRES_IN: int(JWT, 60, 'Lifetime of an email-change ticket, in minutes.', { min: 1 }),
  TICKET_MFA_EXPIRES_IN: int(JWT, 5, 'Lifetime of an MFA login ticket, in minutes.', { min: 1 }),

  // --- cookies ---
  COOKIE_SECRET: str(
    COOKIES,
    '',
    'Signs every cookie (at least 32 characters in production). Unset outside production: generated into `DATA_DIR`.',
    { secret: true },
  ),
  COOKIE_SECURE: shownAs(
    bool(
      COOKIES,
      (c) => c.NODE_ENV === 'production',
      '`Secure` attribute on cookies (sent over HTTPS only).',
    ),
    '`false`; `true` in production',
  ),
  COOKIE_SAME_SITE: oneOf(
    COOKIES,
    ['lax', 'strict', 'none'] as const,
    'lax',
    '`SameSite` attribute on cookies; `none` needs `COOKIE_SECURE=true`.',
    true,
  ),

  // --- rate limits ---
  RATE_LIMIT_ENABLED: bool(
    LIMITS,
    true,
    'Every rate limit (turn off only behind a gateway that limits, or for load tests).',
  ),
  RATE_LIMIT_REDIS_FAILURE: oneOf(
    LIMITS,
    ['local', 'open', 'closed'] as const,
    'local',
    "What the rate limits do while Redis (`REDIS_URL`) cannot be reached: `local` counts in each instance's memory until Redis is back (limits hold per instance, so N instances allow N times the budget meanwhile); `open` lets requests through unlimited; `closed` answers 503 `RATE_LIMIT_UNAVAILABLE` with `Retry-After` (and `/health/ready` reports Redis). Each outage is logged once when it begins and once when it ends.",
  ),
  MAX_REQUESTS: int(LIMITS, 1000, 'Requests per client IP per `TIME_FRAME`, all routes but health.', {
    min: 1,
  }),
  TIME_FRAME: int(LIMITS, 900000, 'Window of `MAX_REQUESTS`, in milliseconds (15 minutes).', { min: 1 }),
  RATE_LIMIT_LOGIN_MAX: int(
    LIMITS,
    300,
    '`POST /auth/login` attempts per client IP per `RATE_LIMIT_LOGIN_WINDOW`.',
    {
      min: 1,
    },
  ),
  RATE_LIMIT_LOGIN_WINDOW: int(
    LIMITS,
    300000,
    'Window of `RATE_LIMIT_LOGIN_MAX`, in milliseconds (5 minutes).',
    {
      min: 1,
    },
  ),
  RATE_LIMIT_LOGIN_ACCOUNT_MAX: int(
    LIMITS,
    5,
    'Wrong passwords (login, or `old_password`) for one account from one client address before delays begin; each further one doubles the wait (429 with `Retry-After`) for that account from that address only.',
    { min: 1, aliases: ['RATE_LIMIT_LOGIN_EMAIL_MAX'] },
  ),
  RATE_LIMIT_LOGIN_ACCOUNT_WINDOW: int(
    LIMITS,
    3_600_000,
    'The failures of `RATE_LIMIT_LOGIN_ACCOUNT_MAX` are forgotten after this long without another attempt, in milliseconds (1 hour; longer than `RATE_LIMIT_LOGIN_DELAY_MAX`); a right password forgets them at once.',
    { min: 1, aliases: ['RATE_LIMIT_LOGIN_EMAIL_WINDOW'] },
  ),
  RATE_LIMIT_LOGIN_DELAY: int(
    LIMITS,
    1000,
    'First wait after `RATE_LIMIT_LOGIN_ACCOUNT_MAX` failures, in milliseconds; it doubles with each further failure.',
    { min: 1 },
  ),
  RATE_LIMIT_LOGIN_DELAY_MAX: int(
    LIMITS,
    900000,
    'Longest wait of `RATE_LIMIT_LOGIN_DELAY`, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_IP_FAILURES_MAX: int(
    LIMITS,
    50,
    'Failed credential checks from one client address, whatever the account (wrong passwords at login, wrong `old_password`, wrong `x-admin-secret`), per `RATE_LIMIT_IP_FAILURES_WINDOW`; beyond, that address gets 429 on them until the window ends.',
    { min: 1 },
  ),
  RATE_LIMIT_IP_FAILURES_WINDOW: int(
    LIMITS,
    900000,
    'Window of `RATE_LIMIT_IP_FAILURES_MAX`, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_REGISTER_MAX: int(
    LIMITS,
    200,
    '`POST /auth/register` attempts per client IP per `RATE_LIMIT_REGISTER_WINDOW`.',
    { min: 1 },
  ),
  RATE_LIMIT_REGISTER_WINDOW: int(
    LIMITS,
    900000,
    'Window of `RATE_LIMIT_REGISTER_MAX`, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_REGISTER_EMAIL_MAX: int(
    LIMITS,
    25,
    '`POST /auth/register` attempts per email per `RATE_LIMIT_REGISTER_EMAIL_WINDOW`.',
    { min: 1 },
  ),
  RATE_LIMIT_REGISTER_EMAIL_WINDOW: int(
    LIMITS,
    900000,
    'Window of `RATE_LIMIT_REGISTER_EMAIL_MAX`, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_REFRESH_MAX: int(
    LIMITS,
    600,
    '`GET /auth/token/refresh` calls per client IP per `RATE_LIMIT_REFRESH_WINDOW`.',
    { min: 1 },
  ),
  RATE_LIMIT_REFRESH_WINDOW: int(
    LIMITS,
    300000,
    'Window of `RATE_LIMIT_REFRESH_MAX`, in milliseconds (5 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_TRANSFORM_MAX: int(
    LIMITS,
    100,
    'Image renders (transforms not answered from the cache) per client IP per `RATE_LIMIT_TRANSFORM_WINDOW`; beyond, 429 until the window ends. Cached variants are not counted.',
    { min: 1 },
  ),
  RATE_LIMIT_TRANSFORM_WINDOW: int(
    LIMITS,
    60000,
    'Window of `RATE_LIMIT_TRANSFORM_MAX`, in milliseconds (1 minute).',
    { min: 1 },
  ),

  // --- email ---
  EMAILS_ENABLED: shownAs(
    bool(
      MAIL,
      (c) => c.NODE_ENV !== 'production',
      'Send emails. Default: on outside production (to the outbox when `SMTP_HOST` is unset), off in production.',
      ['EMAILS_ENABLE'],
    ),
    '`true`; `false` in production',
  ),
  SMTP_HOST: str(
    MAIL,
    '',
    'SMTP server. Unset outside production: emails go to `DATA_DIR/outbox` and the log.',
  ),
  SMTP_PORT: int(MAIL, 587, 'SMTP port.', { min: 1, max: 65535 }),
  SMTP_SECURE: shownAs(
    bool(
      MAIL,
      (c) => c.SMTP_PORT === 465,
      'Implicit TLS. Default: true only on port 465 (587 uses STARTTLS).',
    ),
    '`true` when `SMTP_PORT` is 465',
  ),
  SMTP_USER: str(MAIL, '', 'SMTP user.'),
  SMTP_PASS: str(MAIL, '', 'SMTP password.', { secret: true }),
  SMTP_SENDER: shownAs(
    str(
      MAIL,
      (c) => String(c.SMTP_USER || 'gatehouse@localhost'),
      '`From` address: `SMTP_USER` when set, else `gatehouse@localhost`.',
    ),
    '`SMTP_USER`, else `gatehouse@localhost`',
  ),
  SMTP_AUTH_METHOD: str(MAIL, 'PLAIN', 'SMTP authentication method.'),
  SMTP_TIMEOUT_MS: int(
    MAIL,
    10000,
    'Connection and greeting timeout towards the SMTP server, in milliseconds: how soon an attempt gives up on a server that is down or not answering.',
    { min: 100 },
  ),
  SMTP_SOCKET_TIMEOUT_MS: int(
    MAIL,
    60000,
    'Once connected, how long to wait for each answer of the SMTP server, in milliseconds, notably its acceptance of a message just sent: RFC 5321 gives servers up to 10 minutes there, and giving up earlier on a slow server that then accepts the message sends it twice at the retry.',
    { min: 100 },
  ),
  EMAIL_MAX_ATTEMPTS: int(
    MAIL,
    20,
    'Delivery attempts of one email before the outbox gives it up (the row stays in `auth.email_outbox` with its error). With the default delays, a little over three hours of retrying.',
    { min: 1 },
  ),
  EMAIL_RETRY_DELAY_MS: int(
    MAIL,
    10000,
    'Wait before the first retry of an email, in milliseconds; each further retry waits twice as long (±20 %), up to `EMAIL_RETRY_MAX_DELAY_MS`.',
    { min: 1 },
  ),
  EMAIL_RETRY_MAX_DELAY_MS: int(
    MAIL,
    900000,
    'Longest wait between two attempts of an email, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  EMAIL_POLL_INTERVAL_MS: int(
    MAIL,
    5000,
    "How often each instance looks for due emails, in milliseconds: retries, and rows another instance left (a new email wakes its own instance's sender at once, without waiting for this).",
    { min: 10 },
  ),
  EMAIL_CLAIM_TIMEOUT_MS: int(
    MAIL,
    20000,
    'The lease a sender takes on an email it delivers, in milliseconds, renewed every third of it while the delivery runs (however long the SMTP server takes): an instance that dies (killed, crashed, host gone) leaves its emails to another instance or the next start within this plus `EMAIL_POLL_INTERVAL_MS`. A graceful stop releases at once the emails it has not handed to SMTP.',
    { min: 1000 },
  ),
  EMAIL_SEND_CONCURRENCY: int(MAIL, 4, 'Emails each instance delivers at the same time.', {
    min: 1,
    max: 100,
  }),
  EMAIL_SENT_RETENTION_HOURS: int(
    MAIL,
    24,
    'Hours a sent email stays in `auth.email_outbox` (recipient, template and times; its content, link included, is erased when it is sent).',
    { min: 0 },
  ),
  EMAIL_FAILED_RETENTION_HOURS: int(
    MAIL,
    720,
    'Hours an email given up stays in `auth.email_outbox` with its error (30 days); its content is erased when it is given up.',
    { min: 0 },
  ),
  RATE_LIMIT_EMAIL_MAX: int(
    MAIL,
    5,
    'Requests for an email to one address (lost password, resend, magic-link login, email change) per `RATE_LIMIT_EMAIL_WINDOW`; more get 429, whether or not the address has an account. The emails themselves, whatever the route, also count against `RATE_LIMIT_EMAIL_ADDRESS_MAX`.',
    { min: 1 },
  ),
  RATE_LIMIT_EMAIL_WINDOW: int(
    MAIL,
    900000,
    'Window of `RATE_LIMIT_EMAIL_MAX`, in milliseconds (15 minutes).',
    {
      min: 1,
    },
  ),
  RATE_LIMIT_EMAIL_ADDRESS_MAX: int(
    MAIL,
    5,
    'Emails the service sends to one address per `RATE_LIMIT_EMAIL_ADDRESS_WINDOW`, every kind counted together (activation, "you already have an account", resend, lost password, magic link, email change and its notices). Beyond, the request is answered as usual but no email is queued (and a line is logged without the address), so registrations or requests in a victim\'s name cannot flood the mailbox. Counted where the rate limits count (memory, or Redis with `REDIS_URL`); off with `RATE_LIMIT_ENABLED=false`.',
    { min: 1 },
  ),
  RATE_LIMIT_EMAIL_ADDRESS_WINDOW: int(
    MAIL,
    900000,
    'Window of `RATE_LIMIT_EMAIL_ADDRESS_MAX`, in milliseconds (15 minutes).',
    { min: 1 },
  ),
  RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX: int(
    MAIL,
    20,
    'Emails the service sends to one address per 24 hours, every kind counted together (a cap on top of `RATE_LIMIT_EMAIL_ADDRESS_MAX`).',
    { min: 1 },
  ),
  EMAIL_TEMPLATES_DIR: shownAs(
    str(
      MAIL,
      (c) => path.join(String(c.CUSTOM_DIR), 'emails'),
      'Folder of template overrides laid out like HBP `custom/emails/<template>/{subject,html}.ejs`.',
    ),
    '`<CUSTOM_DIR>/emails`',
  ),

  // --- storage ---
  STORAGE_ENABLED: bool(STORAGE, true, 'Every `/storage` route (404 when false).', ['STORAGE_ENABLE']),
  S3_ENDPOINT: str(
    STORAGE,
    '',
    'S3-compatible endpoint (`host:port` or URL). Unset: files in `DATA_DIR/storage`.',
  ),
  S3_SSL_ENABLED: bool(STORAGE, true, 'HTTPS to the S3 endpoint when it is given without a scheme.', [
    'S3_SSL_ENABLE',
  ]),
  S3_BUCKET: str(STORAGE, '', 'Bucket (created at start when missing).'),
  S3_ACCESS_KEY_ID: str(STORAGE, '', 'S3 access key.', { secret: true }),
  S3_SECRET_ACCESS_KEY: str(STORAGE, '', 'S3 secret key.', { secret: true }),
  S3_REGION: str(STORAGE, 'us-east-1', 'S3 region.'),
  S3_ABORT_UPLOADS_AFTER: int(
    STORAGE,
    86_400_000,
    "At start, multipart uploads in the bucket begun longer ago than this (milliseconds; 1 day) are aborted: an instance killed mid-upload leaves their parts stored, though no object shows them. Younger ones may be a live instance's. 0: never.",
    { min: 0 },
  ),
  STORAGE_RULES_PATH: shownAs(
    str(
      STORAGE,
      (c) => path.join(String(c.CUSTOM_DIR), 'storage-rules', 'rules.yaml'),
      "Storage rules (HBP format). Missing file: the built-in rules (HBP's, with `/public` written only under `/public/<user id>/` by that user).",
    ),
    '`<CUSTOM_DIR>/storage-rules/rules.yaml`',
  ),
  STORAGE_MAX_UPLOAD_SIZE: bytes(
    STORAGE,
    50 * 1024 ** 2,
    'Largest upload accepted (413 beyond). 50 MiB suits a small deployment (photos, documents); raise it for video or archives (HBP: unlimited at the storage layer).',
  ),
  STORAGE_UPLOAD_EXPIRY: int(
    STORAGE,
    86_400_000,
    'Resumable uploads (TUS, `/storage/uploads`) not finished this long (milliseconds; 24 h) after their creation are removed with their parts, and HEAD/PATCH then answer 404.',
    { min: 1000 },
  ),
  STORAGE_QUOTA_BYTES: sizeOrUnlimited(
    STORAGE,
    "What one user may store in all (the sum of the sizes of the files they uploaded), or `unlimited`. An upload that would pass it is refused with 413 `QUOTA_EXCEEDED`. Per-account overrides: `gatehouse users set-quota`. Uploads with the admin secret count in no one's quota.",
  ),
  STORAGE_PUBLIC_MAX_AGE: int(
    STORAGE,
    3600,
    '`Cache-Control: public, max-age` in seconds for files the rules let anyone read (others are `private, no-cache`).',
    { min: 0 },
  ),

  STORAGE_SHARE_MAX_SECONDS: int(
    STORAGE,
    30 * 86_400,
    'Longest lifetime of a share link (`POST /storage/shares` `expires_in`, seconds; 30 days). A longer `expires_in` is refused with 400.',
    { min: 1 },
  ),
  STORAGE_SHARE_DEFAULT_SECONDS: int(
    STORAGE,
    7 * 86_400,
    'Lifetime of a share link made without `expires_in` (seconds; 7 days); at most `STORAGE_SHARE_MAX_SECONDS`.',
    { min: 1 },
  ),

  // --- images ---
  IMAGE_MAX_PIXELS: int(
    IMAGES,
    50_000_000,
    "Largest source image (width × height) that is transformed (422 beyond); also the decoder's own limit.",
    { min: 1 },
  ),
  IMAGE_MAX_OUTPUT_PIXELS: int(
    IMAGES,
    16_777_216,
    'Largest result (width × height, 16 MP = 4096 × 4096 by default) a transform makes; a larger one is refused with 422.',
    { min: 1 },
  ),
  IMAGE_ALLOW_ENLARGEMENT: bool(
    IMAGES,
    false,
    'Let `w`/`h` make a raster image larger than it is. Off: the result keeps the asked aspect ratio but is no larger than the source (HBP enlarged). SVG is drawn at the asked size either way.',
  ),
  IMAGE_SVG_ENABLED: bool(
    IMAGES,
    false,
    'Rasterise SVG files (drawn in their own processes, `IMAGE_SVG_CONCURRENCY` at a time, at the lowest CPU priority; an SVG that refers to anything outside itself is refused). Off: a transform of a file stored as `image/svg+xml` answers the stored file, as a download.',
  ),
  IMAGE_SVG_CONCURRENCY: int(
    IMAGES,
    1,
    'SVG files drawn at once (when `IMAGE_SVG_ENABLED`); more wait in their own queue.',
    {
      min: 1,
      max: 64,
    },
  ),
  IMAGE_CONCURRENCY: int(
    IMAGES,
    2,
    'Raster image transforms run at once, each in a render process of its own; more wait in a queue.',
    {
      min: 1,
      max: 64,
    },
  ),
  IMAGE_QUEUE_LIMIT: int(
    IMAGES,
    100,
    'Image transforms allowed to wait for a turn (raster and SVG each); beyond that a transform gets 503 with `Retry-After`.',
    { min: 0 },
  ),
  IMAGE_TIMEOUT: int(
    IMAGES,
    30,
    'Longest time one transform may take, in seconds: then its render process is killed (and replaced) and the request gets 422 `IMAGE_TIMEOUT`.',
    {
      min: 1,
      max: 3600,
    },
  ),
  IMAGE_FAILURE_TTL: int(
    IMAGES,
    600,
    'Seconds a failed render (415/422) of a file version and parameters is remembered, so that asking again answers the same error at once (10,000 failures at most, least recently asked forgotten first). 0: not remembered.',
    { min: 0 },
  ),
  IMAGE_MAX_SOURCE_SIZE: bytes(
    IMAGES,
    100 * 1024 ** 2,
    'Largest source file (bytes) that is transformed (422 beyond); the file is read into memory.',
  ),
  IMAGE_CACHE_DIR: shownAs(
    str(
      IMAGES,
      (c) => path.join(String(c.DATA_DIR), 'image-cache'),
      'Folder of the local cache of transformed images (per instance; never listed or zipped).',
    ),
    '`<DATA_DIR>/image-cache`',
  ),
  IMAGE_CACHE_MAX_SIZE: bytes(
    IMAGES,
    512 * 1024 ** 2,
    'Size of the local cache of transformed images; least recently used variants are evicted. 0 turns the cache off.',
  ),

  // --- operations ---
  METRICS_TOKEN: str(
    OPS,
    '',
    'Serves Prometheus metrics at `GET /metrics` to requests with `Authorization: Bearer <METRICS_TOKEN>` (at least 32 characters in production). Unset, and `METRICS_PORT` unset: no `/metrics`.',
    { secret: true },
  ),
  METRICS_PORT: int(
    OPS,
    0,
    'Serves `GET /metrics` on this separate port (on `METRICS_HOST`) instead of the main one, for a scraper on a private network; `METRICS_TOKEN`, when set, is required there too (wrong tokens count as guesses). In production it needs `METRICS_TOKEN` unless `METRICS_HOST` is a loopback address (this machine only); otherwise the service refuses to start. `0`: no separate port.',
    { min: 0, max: 65535 },
  ),
  METRICS_HOST: shownAs(
    str(OPS, (c) => String(c.HOST), 'Interface of the `METRICS_PORT` listener.'),
    '`HOST`',
  ),
  CONSOLE_ENABLED: shownAs(
    bool(
      OPS,
      (c) => c.NODE_ENV !== 'production',
      'The development console at `/console`: a web page to sign up, sign in, enrol MFA, follow emailed links (the development outbox) and browse files. Outside production, emailed links that have no `REDIRECT_URL_*` to go to land there. In production it asks for the admin secret (HTTP Basic, any user name) and needs `HASURA_GRAPHQL_ADMIN_SECRET`.',
    ),
    '`true`; `false` in production',
  ),
  API_REFERENCE_ENABLED: shownAs(
    bool(
      OPS,
      (c) => c.NODE_ENV !== 'production',
      'The browsable API reference at `/docs` (Swagger UI over `GET /openapi.json`, its files served by the service itself). `/openapi.json` is served whatever this says.',
    ),
    '`true`; `false` in production',
  ),

  // --- OAuth and OpenID Connect providers (issue 19) ---
  PROVIDER_SUCCESS_REDIRECT: str(
    OAUTH,
    '',
    'Where a provider sign-in lands (`refresh_token` added) when the start route got no `redirect_to`. Unset: `REDIRECT_URL_SUCCESS`.',
  ),
  PROVIDER_FAILURE_REDIRECT: str(
    OAUTH,
    '',
    'Where a failed provider sign-in lands, with `error=<code>` added. Unset: `REDIRECT_URL_ERROR`; neither: the error is answered as JSON.',
  ),
  PROVIDER_TOKENS_STORED: bool(
    OAUTH,
    false,
    "Keep the provider's access and refresh tokens, encrypted like TOTP secrets (`MFA_ENCRYPTION_KEY`), and let the signed-in user read them at `GET /auth/providers/<provider>/tokens`.",
  ),
  PROVIDER_STATE_EXPIRES_IN: int(
    OAUTH,
    10,
    'Minutes a browser has to come back from the provider; the `state` of a sign-in is single use and dies after this.',
    { min: 1, max: 60 },
  ),
  PROVIDER_REQUEST_TIMEOUT: int(
    OAUTH,
    10000,
    'Timeout of each request to a provider (discovery, keys, token, profile), in milliseconds.',
    { min: 100 },
  ),
  ...oauth2Settings('GITHUB', 'GitHub', {
    authorization: 'https://github.com/login/oauth/authorize',
    token: 'https://github.com/login/oauth/access_token',
    profile: 'https://api.github.com/user',
  }),
  ...oidcSettings('GOOGLE', 'Google', 'https://accounts.google.com'),
  ...oauth2Settings('FACEBOOK', 'Facebook', {
    authorization: 'https://www.facebook.com/v19.0/dialog/oauth',
    token: 'https://graph.facebook.com/v19.0/oauth/access_token',
    profile: 'https://graph.facebook.com/v19.0/me?fields=id,name,email,picture.type(large)',
  }),
  TWITTER_ENABLED: bool(OAUTH, false, 'Sign-in with Twitter (X), OAuth 1.0a, at `/auth/providers/twitter`.', [
    'TWITTER_ENABLE',
  ]),
  TWITTER_CONSUMER_KEY: str(OAUTH, '', 'Twitter consumer key (API key).'),
  TWITTER_CONSUMER_SECRET: str(OAUTH, '', 'Twitter consumer secret (API key secret).', { secret: true }),
  TWITTER_REQUEST_TOKEN_URL: endpoint(
    'Twitter request-token endpoint.',
    'https://api.twitter.com/oauth/request_token',
  ),
  TWITTER_AUTHORIZATION_URL: endpoint(
    'Twitter authorization page.',
    'https://api.twitter.com/oauth/authenticate',
  ),
  TWITTER_ACCESS_TOKEN_URL: endpoint(
    'Twitter access-token endpoint.',
    'https://api.twitter.com/oauth/access_token',
  ),
  TWITTER_USER_PROFILE_URL: endpoint(
    'Twitter profile endpoint.',
    'https://api.twitter.com/1.1/account/verify_credentials.json?include_email=true&skip_status=true',
  ),
  ...oidcSettings('LINKEDIN', 'LinkedIn', 'https://www.linkedin.com/oauth'),
  APPLE_ENABLED: bool(OAUTH, false, 'Sign in with Apple at `/auth/providers/apple` (callback by `POST`).', [
    'APPLE_ENABLE',
  ]),
  APPLE_CLIENT_ID: str(OAUTH, '', 'Apple Services ID (the client id).'),
  APPLE_TEAM_ID: str(OAUTH, '', 'Apple developer team id.'),
  APPLE_KEY_ID: str(OAUTH, '', 'Id of the Sign in with Apple key.'),
  APPLE_PRIVATE_KEY: str(
    OAUTH,
    '',
    'The Sign in with Apple key: base64 of the `.p8` file (HBP), or the PEM text itself.',
    { secret: true },
  ),
  APPLE_ISSUER: endpoint(
    "Apple's OpenID Connect issuer (endpoints and keys from its discovery document).",
    'https://appleid.apple.com',
  ),
  ...oauth2Settings(
    'WINDOWS_LIVE',
    'Windows Live',
    {
      authorization: 'https://login.microsoftonline.com/consumers/oauth2/v2.0/authorize',
      token: 'https://login.microsoftonline.com/consumers/oauth2/v2.0/token',
      profile: 'https://graph.microsoft.com/v1.0/me',
    },
    'WINDOWSLIVE',
  ),
  ...oauth2Settings('SPOTIFY', 'Spotify', {
    authorization: 'https://accounts.spotify.com/authorize',
    token: 'https://accounts.spotify.com/api/token',
    profile: 'https://api.spotify.com/v1/me',
  }),
  OIDC_ENABLED: bool(
    OAUTH,
    false,
    'Sign-in with any OpenID Connect provider (Keycloak, Auth0, Azure AD, Okta, Authentik…) at `/auth/providers/oidc`.',
    ['OIDC_ENABLE'],
  ),
  OIDC_ISSUER: endpoint(
    'Issuer URL of the OpenID Connect provider; its endpoints and keys are read from `<issuer>/.well-known/openid-configuration`.',
    '',
  ),
  OIDC_CLIENT_ID: str(OAUTH, '', 'Client id registered with the OpenID Connect provider.'),
  OIDC_CLIENT_SECRET: str(OAUTH, '', 'Client secret registered with the OpenID Connect provider.', {
    secret: true,
  }),
  OIDC_SCOPES: str(
    OAUTH,
    'openid email profile',
    'Scopes asked of the OpenID Connect provider (space-separated; must include `openid`).',
  ),

  // --- Custom claims, webhooks and email codes (issue 30) ---
  JWT_CLAIMS_FUNCTION: str(
    HOOKS,
    '',
    'A PostgreSQL function, schema-qualified (`public.jwt_claims`), called as `fn(user_id uuid, claims jsonb) returns jsonb` in the transaction that issues every access token (sign-in and refresh); the keys of its answer are added to the Hasura claims. See docs/hooks.md.',
  ),
  JWT_CLAIMS_HOOK_URL: url(
    HOOKS,
    'An http(s) endpoint POSTed to (Standard Webhooks signature) on every sign-in and refresh; the `claims` of its answer are added to the Hasura claims. A failure, a timeout or a bad answer refuses the sign-in or refresh with `503 CLAIMS_HOOK_FAILED`. See docs/hooks.md.',
    ['http:', 'https:'],
  ),
  JWT_CLAIMS_HOOK_SECRET: str(
    HOOKS,
    '',
    'The Standard Webhooks secret (`whsec_` and base64, 24 to 64 bytes) the claims hook requests are signed with. Required with `JWT_CLAIMS_HOOK_URL`.',
    { secret: true },
  ),
  JWT_CLAIMS_HOOK_TIMEOUT_MS: int(
    HOOKS,
    2000,
    'How long the claims hook has to answer, in milliseconds; later is a failure (503).',
    { min: 1, max: 60_000 },
  ),
  WEBHOOK_URL: list(
    HOOKS,
    [],
    'http(s) endpoints (comma-separated) that receive every event of `WEBHOOK_EVENTS`, signed as Standard Webhooks. See docs/hooks.md.',
  ),
  WEBHOOK_SECRET: str(
    HOOKS,
    '',
    'The Standard Webhooks secret (`whsec_` and base64, 24 to 64 bytes) webhook deliveries are signed with. Required with `WEBHOOK_URL`.',
    { secret: true },
  ),
  WEBHOOK_EVENTS: list(
    HOOKS,
    [],
    'Event types sent to `WEBHOOK_URL` (comma-separated); empty: all of them (docs/hooks.md lists them).',
  ),
  WEBHOOK_TIMEOUT_MS: int(
    HOOKS,
    10000,
    'How long a webhook receiver has to answer one delivery, in milliseconds; later is a failed attempt, retried.',
    { min: 100 },
  ),
  WEBHOOK_MAX_ATTEMPTS: int(
    HOOKS,
    40,
    'Delivery attempts of one webhook before it is given up (kept in `auth.email_outbox`, listed by `gatehouse webhooks list-failed`). With the default delays, about 31 hours of retrying.',
    { min: 1 },
  ),
  WEBHOOK_RETRY_DELAY_MS: int(
    HOOKS,
    10000,
    'Wait before the first retry of a webhook, in milliseconds; each further retry waits twice as long (±20 %), up to `WEBHOOK_RETRY_MAX_DELAY_MS`.',
    { min: 1 },
  ),
  WEBHOOK_RETRY_MAX_DELAY_MS: int(
    HOOKS,
    3_600_000,
    'Longest wait between two attempts of a webhook, in milliseconds (1 hour).',
    { min: 1 },
  ),
  EMAIL_OTP_ENABLED: bool(
    AUTH,
    false,
    'Sign-in with a 6-digit code sent by email: `POST /auth/otp/email` and `POST /auth/otp/email/verify` (docs/email-flows.md).',
  ),
} satisfies Record<string, Setting<unknown>>;

type Settings = typeof SETTINGS;
type ValueOf<S> = S extends Setting<infer T> ? T : never;

/** The parsed, frozen configuration. Keys are the environment names. */
export type Config = { readonly [K in keyof Settings]: ValueOf<Settings[K]> } & {
  /** Derived: the service runs with `NODE_ENV=production`. */
  readonly isProduction: boolean;
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * The environment with the optional files of `dir` beneath it: `.env`, then `.env.<NODE_ENV>` over it
 * (HBP read `.env.<NODE_ENV>` alone outside production). The real environment always wins.
 */
export function readEnv(env: Env = process.env, dir = process.cwd()): Env {
  const read = (file: string): Env => {
    const full = path.join(dir, file);
    return existsSync(full) ? parseDotenv(readFileSync(full)) : {};
  };
  const base = read('.env');
  const nodeEnv = env['NODE_ENV'] ?? base['NODE_ENV'];
  const specific = nodeEnv && /^[\w-]+$/.test(nodeEnv) ? read(`.env.${nodeEnv}`) : {};
  return { ...base, ...specific, ...env };
}

/**
 * Parses settings from `env`. Unknown variables are ignored (the environment holds much else);
 * every bad value is collected and thrown together as a ConfigError.
 */
export function loadConfig(env: Env, overrides: Partial = {}): Config {
  const problems: string[] = [];
  const failed: string[] = [];
  const out: Partial = {};
  for (const [name, setting] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
    if (name in overrides) {
      out[name] = overrides[name];
      continue;
    }
    const present = [name, ...(setting.aliases ?? [])].filter((n) => env[n] !== undefined && env[n] !== '');
    const before = problems.length;
    if (present.length === 0) {
      out[name] =
        typeof setting.default === 'function'
          ? (setting.default as (c: Partial) => unknown)(out)
          : setting.default;
      continue;
    }
    const parsed: unknown[] = [];
    for (const n of present) {
      try {
        parsed.push(setting.parse(env[n] as string));
      } catch (e) {
        if (!(e instanceof Invalid)) throw e;
        problems.push(`${n} ${e.message}`);
      }
    }
    // An alias may repeat the setting (`AUTH_ENABLE=true` with `AUTH_ENABLED=TRUE`), never contradict it.
    if (parsed.length === present.length && new Set(parsed.map((v) => JSON.stringify(v))).size > 1)
      problems.push(`${present.join(' and ')} are both set, to different values; set only ${name}`);
    if (parsed.length === present.length && problems.length === before) {
      out[name] = parsed[0];
      continue;
    }
    // Bad: the default stands in so that the checks below still run and every problem is told at once;
    // their findings about this setting itself are left out (its own problem is already listed).
    failed.push(name);
    out[name] =
      typeof setting.default === 'function'
        ? (setting.default as (c: Partial) => unknown)(out)
        : setting.default;
  }
  for (const key of Object.keys(overrides)) {
    if (!(key in SETTINGS)) problems.push(`unknown setting ${key}`);
  }
  const later: string[] = [];
  crossChecks(out, later);
  for (const p of [...later, ...keySettingProblems(out as unknown as Config)]) {
    if (!failed.some((name) => new RegExp(`\\b${name}\\b`).test(p))) problems.push(p);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  out.isProduction = out.NODE_ENV === 'production';
  return Object.freeze(out) as Config;
}

/** Shortest COOKIE_SECRET and admin secret accepted in production. */
const MIN_SECRET_LENGTH = 32;

/** Rules that involve several settings. */
function crossChecks(c: Partial, problems: string[]): void {
  const roles = c.ALLOWED_USER_ROLES as string[];
  const defaults = c.DEFAULT_ALLOWED_USER_ROLES as string[];
  for (const r of defaults) {
    if (!roles.includes(r))
      problems.push(`DEFAULT_ALLOWED_USER_ROLES contains "${r}", which is not in ALLOWED_USER_ROLES`);
  }
  // Anyone may register with the roles below: one of them as the admin role would hand the admin API out.
  const adminRole = c.ADMIN_ROLE as string;
  if (adminRole !== '') {
    const open: [string, readonly string[]][] = [
      ['DEFAULT_USER_ROLE', [c.DEFAULT_USER_ROLE as string]],
      ['DEFAULT_ANONYMOUS_ROLE', [c.DEFAULT_ANONYMOUS_ROLE as string]],
      ['DEFAULT_ALLOWED_USER_ROLES', defaults],
      ['ALLOWED_USER_ROLES', roles],
    ];
    for (const [name, list] of open)
      if (list.includes(adminRole))
        problems.push(
          `ADMIN_ROLE "${adminRole}" is in ${name}: every new account could call the admin API; pick a role only an operator grants`,
        );
  }
  const ident = /^[a-z_][a-z0-9_]*$/;
  for (const key of ['REGISTRATION_CUSTOM_FIELDS', 'JWT_CUSTOM_FIELDS'] as const) {
    for (const f of c[key] as string[]) {
      if (!ident.test(f)) problems.push(`${key} entry "${f}" is not a plain lower-case column name`);
    }
  }
  // A custom field is a column users may write (REGISTRATION_CUSTOM_FIELDS): as `x-hasura-user-id` it
  // would let them pick whose identity the token carries.
  for (const f of c.JWT_CUSTOM_FIELDS as string[]) {
    const claim = kebabCase(f);
    if (RESERVED_CLAIMS.includes(claim))
      problems.push(
        `JWT_CUSTOM_FIELDS entry "${f}" would become the claim x-hasura-${claim}, which only the service sets; remove it or use another column`,
      );
  }
  // Browsers drop a SameSite=None cookie that is not Secure, and one that is would go with requests
  // from every site.
  if (c.COOKIE_SAME_SITE === 'none' && !c.COOKIE_SECURE)
    problems.push(
      'COOKIE_SAME_SITE=none needs COOKIE_SECURE=true (cookies sent cross-site must be HTTPS-only)',
    );
  if ((c.METRICS_PORT as number) !== 0 && c.METRICS_PORT === c.PORT)
    problems.push(
      'METRICS_PORT must differ from PORT (or be 0 to serve /metrics on PORT with METRICS_TOKEN)',
    );
  if (c.S3_ENDPOINT && !c.S3_BUCKET) problems.push('S3_BUCKET is required when S3_ENDPOINT is set');
  if ((c.STORAGE_SHARE_DEFAULT_SECONDS as number) > (c.STORAGE_SHARE_MAX_SECONDS as number))
    problems.push('STORAGE_SHARE_DEFAULT_SECONDS must be at most STORAGE_SHARE_MAX_SECONDS');
  if ((c.EMAIL_RETRY_MAX_DELAY_MS as number) < (c.EMAIL_RETRY_DELAY_MS as number))
    problems.push('EMAIL_RETRY_MAX_DELAY_MS must be at least EMAIL_RETRY_DELAY_MS');
  if ((c.RATE_LIMIT_LOGIN_ACCOUNT_WINDOW as number) <= (c.RATE_LIMIT_LOGIN_DELAY_MAX as number))
    problems.push(
      'RATE_LIMIT_LOGIN_ACCOUNT_WINDOW must be longer than RATE_LIMIT_LOGIN_DELAY_MAX (failures would be forgotten during the longest wait)',
    );
  // Allowed origins get credentialed access, so each must name a scheme and a host: a bare `*` (or
  // `https://*`) would hand any site the signed-in user's session, as HBP did. Both lists are read by
  // the one matcher of url-patterns.ts; an entry it cannot read would silently match nothing.
  for (const o of c.CORS_ORIGINS as string[]) {
    if (typeof parseUrlPattern(o) === 'string' || /^[a-z]+:\/\/[^/]*\//i.test(o))
      problems.push(
        `CORS_ORIGINS entry "${o}" is not an origin such as https://app.example.com, https://*.example.com or http://localhost:*`,
      );
  }
  for (const u of c.ALLOWED_REDIRECT_URLS as string[]) {
    const p = parseUrlPattern(u);
    if (typeof p === 'string')
      problems.push(
        `ALLOWED_REDIRECT_URLS entry "${u}" is not a URL pattern such as https://app.example.com, https://*.example.com/auth/* or http://localhost:* (${p})`,
      );
  }
  providerChecks(c, problems);
  hookChecks(c, problems);
  passkeyChecks(c, problems);
  if (c.NODE_ENV === 'production') {
    if (!c.DATABASE_URL)
      problems.push('DATABASE_URL is required in production (the embedded database is for development)');
    if (!c.COOKIE_SECRET)
      problems.push('COOKIE_SECRET is required in production (cookies are always signed)');
    // Both are HMAC keys or bearer secrets that can be guessed offline or online when short.
    else if ((c.COOKIE_SECRET as string).length < MIN_SECRET_LENGTH)
      problems.push(`COOKIE_SECRET must be at least ${MIN_SECRET_LENGTH} characters in production`);
    const admin = c.HASURA_GRAPHQL_ADMIN_SECRET as string;
    if (admin !== '' && admin.length < MIN_SECRET_LENGTH)
      problems.push(
        `HASURA_GRAPHQL_ADMIN_SECRET must be at least ${MIN_SECRET_LENGTH} characters in production (or empty: no admin bypass)`,
      );
    if (c.TRUST_PROXY === true)
      problems.push(
        "TRUST_PROXY=true believes X-Forwarded-For from any client, who could then choose its own address for rate limits; list the proxies' addresses or CIDRs instead",
      );
    if (!c.MFA_ENCRYPTION_KEY && c.MFA_ENABLED)
      problems.push('MFA_ENCRYPTION_KEY is required in production when MFA_ENABLED is true');
    if (c.EMAILS_ENABLED && !c.SMTP_HOST)
      problems.push(
        'SMTP_HOST is required in production when EMAILS_ENABLED is true (or set EMAILS_ENABLED=false)',
      );
    // In production the console is shown to the holder of the admin secret only (console/plugin.ts).
    if (c.CONSOLE_ENABLED && admin === '')
      problems.push(
        'CONSOLE_ENABLED=true in production needs HASURA_GRAPHQL_ADMIN_SECRET (the console asks for it)',
      );
    const metricsToken = c.METRICS_TOKEN as string;
    if (metricsToken !== '' && metricsToken.length < MIN_SECRET_LENGTH)
      problems.push(`METRICS_TOKEN must be at least ${MIN_SECRET_LENGTH} characters in production`);
    // A metrics port without a token answers whoever reaches it: refused, unless it listens on this
    // machine only (a scraper beside the service). Refusing says so at start; a listener quietly moved
    // to loopback would look like a working setting to whoever scrapes it over the network.
    const metricsHost = String(c.METRICS_HOST ?? c.HOST ?? '');
    if ((c.METRICS_PORT as number) !== 0 && metricsToken === '' && !isLoopbackHost(metricsHost))
      problems.push(
        `METRICS_PORT in production needs METRICS_TOKEN (the scraper sends it as a bearer token), or METRICS_HOST=127.0.0.1 to serve the metrics to this machine only (METRICS_HOST is ${metricsHost || 'unset'})`,
      );
    // JWT_KEY (or CUSTOM_DIR/keys/private.pem) is checked by keySettingProblems, with the key itself.
  }
}

/** Passkeys: an RP id and origins the browser will accept together (WebAuthn §5.1.3, §7.1 step 9). */
function passkeyChecks(c: Partial, problems: string[]): void {
  if (c.WEBAUTHN_ENABLED !== true) return;
  const rpId = String(c.WEBAUTHN_RP_ID ?? '').toLowerCase();
  const origins = (c.WEBAUTHN_ORIGINS ?? []) as string[];
  if (rpId === '') {
    problems.push(
      c.NODE_ENV === 'production'
        ? 'WEBAUTHN_RP_ID is required in production when WEBAUTHN_ENABLED is true (the domain passkeys are bound to, such as example.com)'
        : 'WEBAUTHN_RP_ID is empty and SERVER_URL names no host to take it from',
    );
    return;
  }
  if (isIP(rpId.replace(/^\[|\]$/g, '')) !== 0) {
    problems.push(
      `WEBAUTHN_RP_ID ${rpId} is an IP address, which browsers refuse for passkeys: use a domain name (for development, SERVER_URL=http://localhost:<PORT>)`,
    );
    return;
  }
  if (origins.length === 0) {
    problems.push(
      'WEBAUTHN_ORIGINS is required when WEBAUTHN_ENABLED is true (such as https://app.example.com)',
    );
    return;
  }
  for (const o of origins) {
    const host = originOf(o) === undefined ? undefined : new URL(o).hostname;
    if (host === undefined) problems.push(`WEBAUTHN_ORIGINS entry ${o} is not an http(s) origin`);
    else if (host !== rpId && !host.endsWith(`.${rpId}`))
      problems.push(`WEBAUTHN_ORIGINS entry ${o} is not on WEBAUTHN_RP_ID ${rpId} or one of its subdomains`);
  }
}

/** Whether a listener on `host` is reachable from this machine only (a loopback address or name). */
function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** A Standard Webhooks secret: `whsec_` (optional) and the base64 of 24 to 64 random bytes. */
function webhookSecretProblem(name: string, secret: string): string | undefined {
  const b64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  const size = /^[A-Za-z0-9+/]+={0,2}$/.test(b64) ? Buffer.from(b64, 'base64').length : 0;
  if (size < 24 || size > 64)
    return `${name} must be a Standard Webhooks secret: whsec_ followed by the base64 of 24 to 64 random bytes (for example: echo whsec_$(openssl rand -base64 32))`;
  return undefined;
}

/** Custom claims and webhooks (issue 30): a hook needs its secret, and names what it calls properly. */
function hookChecks(c: Partial, problems: string[]): void {
  const fn = c.JWT_CLAIMS_FUNCTION as string;
  // Interpolated into SQL (a function name cannot be a parameter): plain identifiers only.
  if (fn !== '' && !/^[A-Za-z_][A-Za-z0-9_]{0,62}\.[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(fn))
    problems.push(
      `JWT_CLAIMS_FUNCTION must be a schema-qualified function name such as public.jwt_claims (letters, digits and _), got "${fn}"`,
    );
  const hookUrl = c.JWT_CLAIMS_HOOK_URL as string;
  if (hookUrl !== '' && !/^https?:\/\/[^/]/i.test(hookUrl))
    problems.push(`JWT_CLAIMS_HOOK_URL must be an http:// or https:// URL, got "${hookUrl}"`);
  if (hookUrl !== '') {
    const p = webhookSecretProblem('JWT_CLAIMS_HOOK_SECRET', c.JWT_CLAIMS_HOOK_SECRET as string);
    if (p) problems.push(p);
  }
  const urls = c.WEBHOOK_URL as string[];
  for (const u of urls) {
    let protocol = '';
    try {
      protocol = new URL(u).protocol;
    } catch {}
    if (protocol !== 'http:' && protocol !== 'https:')
      problems.push(`WEBHOOK_URL entry "${u}" must be an http:// or https:// URL`);
  }
  if (urls.length > 0) {
    const p = webhookSecretProblem('WEBHOOK_SECRET', c.WEBHOOK_SECRET as string);
    if (p) problems.push(p);
  }
  for (const t of c.WEBHOOK_EVENTS as string[])
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(t))
      problems.push(`WEBHOOK_EVENTS entry "${t}" is not an event type (${WEBHOOK_EVENT_TYPES.join(', ')})`);
  if ((c.WEBHOOK_RETRY_MAX_DELAY_MS as number) < (c.WEBHOOK_RETRY_DELAY_MS as number))
    problems.push('WEBHOOK_RETRY_MAX_DELAY_MS must be at least WEBHOOK_RETRY_DELAY_MS');
}

/** OAuth and OpenID Connect providers (issue 19): an enabled provider needs its credentials. */
function providerChecks(c: Partial, problems: string[]): void {
  const need = (flag: string, names: string[]) => {
    if (!c[flag]) return;
    for (const n of names) if (!c[n]) problems.push(`${n} is required when ${flag} is true`);
  };
  for (const p of ['GITHUB', 'GOOGLE', 'FACEBOOK', 'LINKEDIN', 'WINDOWS_LIVE', 'SPOTIFY', 'OIDC'])
    need(`${p}_ENABLED`, [`${p}_CLIENT_ID`, `${p}_CLIENT_SECRET`]);
  need('TWITTER_ENABLED', ['TWITTER_CONSUMER_KEY', 'TWITTER_CONSUMER_SECRET']);
  need('APPLE_ENABLED', ['APPLE_CLIENT_ID', 'APPLE_TEAM_ID', 'APPLE_KEY_ID', 'APPLE_PRIVATE_KEY']);
  need('OIDC_ENABLED', ['OIDC_ISSUER']);
  if (c.OIDC_ENABLED && !String(c.OIDC_SCOPES).split(/\s+/).includes('openid'))
    problems.push('OIDC_SCOPES must include openid');
  if (c.NODE_ENV === 'production') {
    // A token request over http would carry the client secret and the user's tokens in clear.
    for (const [name, value] of Object.entries(c)) {
      if (
        /_(ISSUER|AUTHORIZATION_URL|TOKEN_URL|USER_PROFILE_URL|REQUEST_TOKEN_URL|ACCESS_TOKEN_URL)$/.test(
          name,
        )
      ) {
        const provider = name
          .split('_')
          .slice(0, name.startsWith('WINDOWS_LIVE') ? 2 : 1)
          .join('_');
        if (c[`${provider}_ENABLED`] && typeof value === 'string' && value.startsWith('http:'))
          problems.push(`${name} must be an https URL in production`);
      }
    }
    if (c.PROVIDER_TOKENS_STORED && !c.MFA_ENCRYPTION_KEY)
      problems.push(
        'MFA_ENCRYPTION_KEY is required in production when PROVIDER_TOKENS_STORED is true (it encrypts the tokens)',
      );
  }
}

/** The settings table for documentation (docs/configuration.md) and tests. */
export function describeSettings(): {
  name: string;
  aliases: string[];
  group: string;
  doc: string;
  default: string;
  /** Markdown describing a computed default, when the setting has one. */
  defaultDoc?: string;
}[] {
  const shown: Partial = {};
  return (Object.entries(SETTINGS) as [string, Setting<unknown>][]).map(([name, s]) => {
    const value = typeof s.default === 'function' ? (s.default as (c: Partial) => unknown)(shown) : s.default;
    shown[name] = value;
    const dflt = Array.isArray(value) ? value.join(',') : String(value);
    return {
      name,
      aliases: [...(s.aliases ?? [])],
      group: s.group,
      doc: s.doc,
      default: s.secret && dflt ? '(secret)' : dflt,
      defaultDoc: s.defaultDoc,
    };
  });
}

/** Config for tests and tools: defaults plus explicit values, no environment. */
export function configFrom(values: { [K in keyof Settings]?: ValueOf<Settings[K]> }): Config {
  return loadConfig({}, values as Partial);
}
