/**
 * The service the fuzzer attacks, whether built in the test process (test/reliability/fuzz.test.ts) or
 * run as its own process (scripts/fuzz.ts): the settings that switch every route on, the real peers those
 * settings point at (an SMTP server, an OpenID provider, an OAuth 2.0 server), a pool of signed-in
 * accounts made through the routes, and the loop that sends generated requests and tallies the answers.
 */
import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import sharp from 'sharp';
import {
  type Answer,
  describe,
  type FuzzRequest,
  type FuzzUser,
  generate,
  type Operation,
  operationsOf,
  opName,
  Rng,
  send,
  violation,
  type World,
} from './fuzz.ts';
import { type OAuth2Peer, startOAuth2Peer } from './oauth2-peer.ts';
import { type OidcPeer, startOidcPeer } from './oidc-peer.ts';
import { startSmtp, type TestSmtp } from './smtp.ts';

export const FUZZ_ADMIN_SECRET = 'fuzz-admin-secret-0123456789abcdefghij';
const SERVICE = 'http://gatehouse.test';
const ORIGIN = 'http://app.test';
const callback = (p: string) => `${SERVICE}/auth/providers/${p}/callback`;

export interface Peers {
  smtp: TestSmtp;
  oidc: OidcPeer;
  github: OAuth2Peer;
  close(): Promise<void>;
}

export async function startPeers(): Promise<Peers> {
  const smtp = await startSmtp();
  const oidc = await startOidcPeer({
    clients: [{ client_id: 'fuzz', client_secret: 'fuzz-secret', redirect_uris: [callback('oidc')] }],
  });
  const github = await startOAuth2Peer({
    clientId: 'fuzz',
    clientSecret: 'fuzz-secret',
    redirectUri: callback('github'),
    clientAuth: 'basic',
    profile: (u) => ({ id: u.id, login: 'fuzz' }),
    githubStyle: true,
  });
  return {
    smtp,
    oidc,
    github,
    async close() {
      await Promise.all([smtp.stop(), oidc.close(), github.close()]);
    },
  };
}

type Settings = Record<string, string | number | boolean | string[]>;

/**
 * Two configurations that between them switch on every route (a direct and a verified email change
 * exclude each other): `open` without rate limits, so requests reach the handlers; `limited` with the
 * default limits and forwarded addresses believed, so the limiter sees garbage too.
 */
export const SETUPS: Record<'open' | 'limited', (peers: Peers) => Settings> = {
  open: (peers) => ({
    JWT_ALGORITHM: 'HS256',
    JWT_KEY: 'fuzz-jwt-key-of-at-least-32-bytes-long!!',
    JWT_EXPIRES_IN: 120,
    SERVER_URL: SERVICE,
    CORS_ORIGINS: [ORIGIN],
    REDIRECT_URL_SUCCESS: `${ORIGIN}/ok`,
    REDIRECT_URL_ERROR: `${ORIGIN}/failed`,
    ALLOWED_REDIRECT_URLS: [`${ORIGIN}/*`],
    HASURA_GRAPHQL_ADMIN_SECRET: FUZZ_ADMIN_SECRET,
    RATE_LIMIT_ENABLED: false,
    MFA_ENABLED: true,
    CHANGE_EMAIL_ENABLED: true,
    VERIFY_EMAILS: false,
    LOST_PASSWORD_ENABLED: true,
    MAGIC_LINK_ENABLED: true,
    EMAIL_OTP_ENABLED: true,
    ANONYMOUS_USERS_ENABLED: true,
    ALLOW_USER_SELF_DELETE: true,
    USER_IMPERSONATION_ENABLED: true,
    METRICS_TOKEN: 'fuzz-metrics-token',
    STORAGE_MAX_UPLOAD_SIZE: 256 * 1024,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: peers.smtp.port,
    SMTP_SENDER: 'Gatehouse <no-reply@gatehouse.test>',
    OIDC_ENABLED: true,
    OIDC_ISSUER: peers.oidc.issuer,
    OIDC_CLIENT_ID: 'fuzz',
    OIDC_CLIENT_SECRET: 'fuzz-secret',
    GITHUB_ENABLED: true,
    GITHUB_CLIENT_ID: 'fuzz',
    GITHUB_CLIENT_SECRET: 'fuzz-secret',
    GITHUB_AUTHORIZATION_URL: peers.github.authorizationUrl,
    GITHUB_TOKEN_URL: peers.github.tokenUrl,
    GITHUB_USER_PROFILE_URL: peers.github.profileUrl,
    PROVIDER_TOKENS_STORED: true,
  }),
  limited: (peers) => ({
    JWT_ALGORITHM: 'HS256',
    JWT_KEY: 'fuzz-jwt-key-of-at-least-32-bytes-long!!',
    JWT_EXPIRES_IN: 120,
    SERVER_URL: SERVICE,
    CORS_ORIGINS: [ORIGIN],
    REDIRECT_URL_SUCCESS: `${ORIGIN}/ok`,
    REDIRECT_URL_ERROR: `${ORIGIN}/failed`,
    HASURA_GRAPHQL_ADMIN_SECRET: FUZZ_ADMIN_SECRET,
    TRUST_PROXY: ['loopback'],
    CHANGE_EMAIL_ENABLED: true,
    VERIFY_EMAILS: true,
    LOST_PASSWORD_ENABLED: true,
    MAGIC_LINK_ENABLED: true,
    STORAGE_MAX_UPLOAD_SIZE: 256 * 1024,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: peers.smtp.port,
    SMTP_SENDER: 'Gatehouse <no-reply@gatehouse.test>',
  }),
};

/** The settings as environment variables (for a service run as a process). */
export function asEnv(settings: Settings): Record<string, string> {
  return Object.fromEntries(
    Object.entries(settings).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]),
  );
}

let forwarded = 0;
/** A client address of its own per call (the `limited` setup believes X-Forwarded-For from loopback). */
export function nextClientAddress(): string {
  forwarded += 1;
  return `10.${(forwarded >> 16) & 255}.${(forwarded >> 8) & 255}.${forwarded & 255}`;
}

async function request(base: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('x-forwarded-for', nextClientAddress());
  return fetch(`${base}${path}`, { ...init, headers, redirect: 'manual' });
}

/** The world of accounts and files the generator draws on, made and refreshed through the routes. */
export class HttpWorld implements World {
  readonly adminSecret = FUZZ_ADMIN_SECRET;
  readonly origins = [ORIGIN];
  private pool: FuzzUser[] = [];
  private cookies: string[] = [];
  private image: Buffer | undefined;

  constructor(
    private readonly base: string,
    private readonly size = 8,
  ) {}

  users(): readonly FuzzUser[] {
    return this.pool;
  }

  cookie(): string | undefined {
    return this.cookies[this.cookies.length - 1];
  }

  /** Registers an account, uploads its files, and puts it in the pool (the oldest leaves). */
  async addUser(): Promise<void> {
    const email = `fuzz-${randomBytes(8).toString('hex')}@example.com`;
    const password = `pw-${randomBytes(6).toString('hex')}`;
    const res = await request(this.base, '/auth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password, cookie: false }),
    });
    if (res.status !== 200)
      throw new Error(`cannot register a fuzz account: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { jwt_token: string; refresh_token: string; user: { id: string } };
    const user: FuzzUser = {
      email,
      password,
      userId: body.user.id,
      jwt: body.jwt_token,
      refreshToken: body.refresh_token,
      files: [],
    };
    this.image ??= await sharp({ create: { width: 48, height: 32, channels: 3, background: '#36c' } })
      .png()
      .toBuffer();
    for (const [name, type, data] of [
      ['notes.txt', 'text/plain', Buffer.from('fuzz me')],
      ['picture.png', 'image/png', this.image],
      ['broken.png', 'image/png', this.image.subarray(0, 40)],
    ] as const) {
      const form = new FormData();
      form.append('file', new Blob([data], { type }), name);
      const path = `user/${user.userId}/${name}`;
      const up = await request(this.base, `/storage/o/${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user.jwt}` },
        body: form,
      });
      if (up.status === 200) user.files.push(path);
      else await up.arrayBuffer();
    }
    this.pool.push(user);
    if (this.pool.length > this.size) this.pool.shift();
    // A cookie session too, for the routes that read the refresh token from a cookie.
    const login = await request(this.base, '/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    const set = login.headers.getSetCookie().map((c) => c.split(';')[0]);
    await login.arrayBuffer();
    if (set.length > 0) this.cookies = [...this.cookies.slice(-7), set.join('; ')];
  }

  async providerState(provider: string): Promise<string | undefined> {
    const res = await request(this.base, `/auth/providers/${encodeURIComponent(provider)}`).catch(
      () => undefined,
    );
    if (!res) return undefined;
    await res.arrayBuffer();
    const location = res.headers.get('location');
    if (res.status !== 302 || !location) return undefined;
    try {
      return new URL(location).searchParams.get('state') ?? undefined;
    } catch {
      return undefined;
    }
  }
}

/** The operations of the service's OpenAPI document. */
export async function fetchOperations(base: string): Promise<Operation[]> {
  const res = await fetch(`${base}/openapi.json`);
  if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
  return operationsOf((await res.json()) as never);
}

export interface RouteTally {
  requests: number;
  /** Time spent waiting for answers, in milliseconds. */
  ms: number;
  statuses: Record<number, number>;
  failures: { problem: string; request: string; answer: string }[];
}

export interface FuzzReport {
  seed: number;
  requests: number;
  fiveHundreds: number;
  failures: number;
  byRoute: Record<string, RouteTally>;
  elapsedMs: number;
}

export interface FuzzRunOptions {
  base: string;
  operations: Operation[];
  world: HttpWorld;
  seed: number;
  perRoute: number;
  concurrency: number;
  /** Give each request a client address of its own (setups that believe X-Forwarded-For). */
  spreadClients?: boolean;
  /** A new account joins the pool every this many requests. */
  newUserEvery?: number;
  /** Kept per route for the report. */
  maxFailuresKept?: number;
  /** Stop sending at this time (epoch ms), however many requests are left. */
  stopAt?: number;
  /** Called now and then with the requests sent so far. */
  progress?: (sent: number) => void;
}

/** Sends `perRoute` generated requests to every operation, `concurrency` at a time, and tallies them. */
export async function runFuzz(opts: FuzzRunOptions): Promise<FuzzReport> {
  const started = Date.now();
  const agent = new Agent({ keepAlive: true, maxSockets: opts.concurrency });
  const byRoute: Record<string, RouteTally> = {};
  for (const op of opts.operations) byRoute[opName(op)] = { requests: 0, ms: 0, statuses: {}, failures: [] };
  // Interleaved, so that every route sees the pool at every stage and a slow route does not come last.
  const queue: Operation[] = [];
  for (let i = 0; i < opts.perRoute; i++) queue.push(...opts.operations);
  let next = 0;
  let sent = 0;
  let fiveHundreds = 0;
  let failures = 0;
  const keep = opts.maxFailuresKept ?? 5;
  const newUserEvery = opts.newUserEvery ?? 250;
  let growing: Promise<void> | undefined;

  const worker = async (index: number) => {
    const rng = new Rng(opts.seed * 1000 + index);
    while (next < queue.length && (opts.stopAt === undefined || Date.now() < opts.stopAt)) {
      const op = queue[next++] as Operation;
      const { request } = await generate(op, opts.world, rng);
      if (opts.spreadClients && !request.headers.some(([k]) => k === 'x-forwarded-for') && rng.chance(0.9)) {
        request.headers.push(['x-forwarded-for', nextClientAddress()]);
      }
      const tally = byRoute[opName(op)] as RouteTally;
      let answer: Answer | undefined;
      let problem: string | undefined;
      const t0 = performance.now();
      try {
        answer = await send(opts.base, request, agent);
        problem = violation(request, answer);
      } catch (err) {
        problem = `no answer: ${(err as Error).message}`;
      }
      tally.requests++;
      tally.ms += performance.now() - t0;
      sent++;
      if (answer) tally.statuses[answer.status] = (tally.statuses[answer.status] ?? 0) + 1;
      if (problem?.startsWith('answered 5')) fiveHundreds++;
      if (problem) {
        failures++;
        if (tally.failures.length < keep) tally.failures.push(failure(problem, request, answer));
      }
      if (sent % newUserEvery === 0 && !growing) {
        growing = opts.world
          .addUser()
          .catch((err: unknown) => {
            // Counted like any request without an answer: the service must keep serving sign-ups.
            failures++;
            const tally = byRoute['POST /auth/register'];
            if (tally && tally.failures.length < keep)
              tally.failures.push({
                problem: `a new fuzz account failed: ${String(err)}`,
                request: 'addUser',
                answer: 'none',
              });
          })
          .finally(() => {
            growing = undefined;
          });
      }
      if (sent % 1000 === 0) opts.progress?.(sent);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, (_, i) => worker(i)));
  await growing;
  agent.destroy();
  return {
    seed: opts.seed,
    requests: sent,
    fiveHundreds,
    failures,
    byRoute,
    elapsedMs: Date.now() - started,
  };
}

function failure(problem: string, request: FuzzRequest, answer: Answer | undefined) {
  return {
    problem,
    request: describe(request),
    answer: answer ? `${answer.status} ${answer.body.toString('utf8').slice(0, 300)}` : 'none',
  };
}
