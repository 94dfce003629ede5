/**
 * The development console at `/console`: a few static files (assets/, plain HTML, CSS and JavaScript
 * modules, no build step) that use the service's own routes as any web client would, on the same origin,
 * with the session in the service's httpOnly cookies. A few read-only JSON routes only the console needs:
 * `api/settings` (which features are on, and the setting that turns each on), `api/session` (whether
 * the browser holds a refresh cookie, so that a signed-out load asks nothing that answers 401),
 * `api/me` (the signed-in person's two-factor state and the folders the storage rules let them write)
 * and, when the mailer writes the development outbox, `api/outbox` (its messages, tickets included), read
 * only by this machine, not through a proxy, or with the admin secret (isLocalRequest).
 *
 * When it is served (CONSOLE_ENABLED): outside production by default. In production only when turned on,
 * and then only to whoever gives the admin secret, by HTTP Basic (any user name, the secret as password;
 * the browser asks once and repeats it for the `/console/` folder only). Wrong secrets count against the
 * guess limits like a wrong `x-admin-secret`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { findMfaAccountByUserId } from '../auth/mfa/mfa-store.ts';
import type { Config } from '../config.ts';
import { secretsEqual } from '../constant-time.ts';
import type { Database } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { ADMIN_SECRET_SUBJECT } from '../http/guesses.ts';
import { REFRESH_COOKIE, signedCookie } from '../http/identity.ts';
import { readOutbox } from '../mail/dev-outbox.ts';
import type { StorageRules } from '../storage/rules/rules.ts';
import { switches } from './switches.ts';
import { writableFolders } from './writable.ts';

export interface ConsoleOptions {
  config: Config;
  /** The development outbox folder, when the mailer writes one (never in production). */
  outboxDir: string | undefined;
  /** Read for the signed-in person's two-factor state. */
  db: Database;
  /** The storage rules, when storage is on: the folders a person may write are derived from them. */
  rules: StorageRules | undefined;
}

/**
 * The console's pages run only their own scripts and styles and talk only to this origin. Images may be
 * `data:` (the MFA QR code the service returns) or this origin's (thumbnails from the storage routes).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The files served, by the name under /console/ (a fixed list: no path ever reaches the file system). */
const ASSETS = [
  'index.html',
  'console.css',
  'favicon.svg',
  'main.js',
  'api.js',
  'dom.js',
  'views.js',
  'files.js',
  'activity.js',
  'passkeys.js',
  'admin.js',
] as const;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

function loadAssets(): Map<string, Asset> {
  const out = new Map<string, Asset>();
  for (const name of ASSETS) {
    const body = readFileSync(fileURLToPath(new URL(`./assets/${name}`, import.meta.url)));
    const ext = name.slice(name.lastIndexOf('.'));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    out.set(name, { body, type: TYPES[ext] ?? 'application/octet-stream', etag });
  }
  return out;
}

const BASIC = /^Basic +([A-Za-z0-9+/=]+)\s*$/i;

/** The password of an `Authorization: Basic` header, or undefined. */
function basicPassword(header: string | undefined): string | undefined {
  const m = header === undefined ? null : BASIC.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

function adminSecretRequired(): AppError {
  return new AppError('UNAUTHENTICATED', 'The console asks for the admin secret (as the password).', {
    headers: { 'www-authenticate': 'Basic realm="Gatehouse console", charset="UTF-8"' },
  });
}

/** The host name of a Host header (`name[:port]` or `[v6]:port`), lower-case. */
function hostName(host: string | undefined): string {
  if (!host) return '';
  const h = host.toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  return h.replace(/:\d+$/, '');
}

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.replace(/^::ffff:/i, '');
  return a === '::1' || (isIP(a) === 4 && a.startsWith('127.'));
}

/** Host names that only ever mean this machine (RFC 6761 reserves `localhost` and its subdomains). */
function isLoopbackName(name: string): boolean {
  return (
    name === 'localhost' ||
    name.endsWith('.localhost') ||
    name === '[::1]' ||
    (isIP(name) === 4 && name.startsWith('127.'))
  );
}

/**
 * Headers a proxy adds to say whom it forwards for. A request carrying any of them came through a proxy
 * (ngrok, nginx, a tunnel, a load balancer), even when that proxy runs on this machine.
 */
const FORWARDING_HEADERS = [
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'x-forwarded-server',
  'x-forwarded',
  'forwarded-for',
  'x-real-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-original-forwarded-for',
  'x-original-host',
  'via',
];

/**
 * The outbox holds every account's tickets, so it is read by this machine only. A loopback peer is not
 * enough: a reverse proxy or tunnel on this machine (ngrok, nginx) connects from 127.0.0.1 on behalf of
 * the whole internet, and SERVER_URL often names that tunnel. So the request must also name this machine
 * in its Host (a loopback name, never SERVER_URL's public name: that also keeps out a site whose name is
 * made to resolve to 127.0.0.1, DNS rebinding) and carry no forwarding header. A proxy that rewrites Host
 * to a loopback name and adds no forwarding header cannot be told from a local client: docs/security.md
 * says so. Otherwise, the admin secret (x-admin-secret) opens it, a wrong one counting as a guess.
 */
function isLocalRequest(request: FastifyRequest): boolean {
  if (!isLoopback(request.socket.remoteAddress)) return false;
  if (!isLoopbackName(hostName(request.headers.host))) return false;
  return !FORWARDING_HEADERS.some((h) => request.headers[h] !== undefined);
}

/** What the console needs to know about the settings to show only what works. */
function consoleSettings(config: Config, outbox: boolean) {
  return {
    production: config.isProduction,
    auth: config.AUTH_ENABLED,
    storage: config.STORAGE_ENABLED,
    register: config.AUTH_ENABLED && config.AUTH_LOCAL_USERS_ENABLED,
    autoActivate: config.AUTO_ACTIVATE_NEW_USERS,
    magicLink: config.MAGIC_LINK_ENABLED,
    lostPassword: config.LOST_PASSWORD_ENABLED,
    changeEmail: config.CHANGE_EMAIL_ENABLED,
    verifyEmails: config.VERIFY_EMAILS,
    mfa: config.MFA_ENABLED,
    passkeys: config.WEBAUTHN_ENABLED,
    emails: config.EMAILS_ENABLED,
    // The admin pages: whether a session may use them by role (the role's name is no secret), and
    // whether an admin secret exists to type.
    adminRole: config.ADMIN_ROLE === '' ? null : config.ADMIN_ROLE,
    adminSecret: config.HASURA_GRAPHQL_ADMIN_SECRET !== '',
    outbox,
    ...switches(config),
  };
}

/** Registered with the prefix `/console`. */
export const consoleRoutes: FastifyPluginAsync<ConsoleOptions> = async (app, opts) => {
  const { config, outboxDir, db, rules } = opts;
  const assets = loadAssets();
  const mayReadOutbox = async (request: FastifyRequest): Promise<boolean> => {
    if (isLocalRequest(request)) return true;
    const given = request.headers['x-admin-secret'];
    if (typeof given !== 'string' || !config.HASURA_GRAPHQL_ADMIN_SECRET) return false;
    return app.guesses.guard(ADMIN_SECRET_SUBJECT, request.ip, () =>
      secretsEqual(given, config.HASURA_GRAPHQL_ADMIN_SECRET),
    );
  };

  if (config.isProduction) {
    // config.ts refuses CONSOLE_ENABLED in production without an admin secret.
    app.addHook('onRequest', async (request) => {
      const given = basicPassword(request.headers.authorization);
      const ok = await app.guesses.guard(
        ADMIN_SECRET_SUBJECT,
        request.ip,
        () => given !== undefined && secretsEqual(given, config.HASURA_GRAPHQL_ADMIN_SECRET),
      );
      if (!ok) throw adminSecretRequired();
      // The Basic credential is the console's, not the caller's identity: `api/me` reads the session
      // cookie, which an Authorization header would take precedence over (and refuse, being Basic).
      delete request.headers.authorization;
    });
  }
  app.addHook('onSend', async (_request, reply) => {
    reply.header('content-security-policy', CONSOLE_CSP);
  });

  const send = (request: FastifyRequest, reply: FastifyReply, asset: Asset) => {
    reply.header('etag', asset.etag).header('cache-control', 'no-cache').type(asset.type);
    if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
    return reply.send(asset.body);
  };
  const hidden = { schema: { hide: true } };

  app.get('', hidden, async (_request, reply) => reply.redirect('/console/', 302));
  app.get('/', { ...hidden, prefixTrailingSlash: 'slash' }, async (request, reply) =>
    send(request, reply, assets.get('index.html') as Asset),
  );
  app.get<{ Params: { name: string } }>('/:name', hidden, async (request, reply) => {
    const asset = assets.get(request.params.name);
    if (!asset) throw new AppError('NOT_FOUND');
    return send(request, reply, asset);
  });

  app.get('/api/settings', hidden, async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return consoleSettings(config, outboxDir !== undefined);
  });
  // Whether a refresh cookie is there to try: a signed-out page load then asks nothing that answers 401
  // (the cookie is httpOnly, so the page cannot look itself). Presence only; the refresh still decides.
  app.get('/api/session', hidden, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return { refreshCookie: signedCookie(request, REFRESH_COOKIE) !== undefined };
  });

  app.get('/api/me', hidden, async (request, reply) => {
    const who = await request.identity();
    if (!who) throw new AppError('UNAUTHENTICATED');
    reply.header('cache-control', 'no-store');
    const account = await findMfaAccountByUserId(db, who['user-id']);
    return {
      mfa: account?.mfaEnabled ?? false,
      writable: rules ? writableFolders(rules, who) : [],
    };
  });

  if (outboxDir !== undefined && !config.isProduction) {
    app.get('/api/outbox', hidden, async (request, reply) => {
      if (!(await mayReadOutbox(request)))
        throw new AppError(
          'FORBIDDEN',
          'The development outbox is served only to this machine (a loopback address and Host, no proxy in between), or with the admin secret in x-admin-secret.',
        );
      reply.header('cache-control', 'no-store');
      return { messages: readOutbox(outboxDir) };
    });
  }
};
