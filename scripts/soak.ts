/**
 * `npm run soak [-- --clients=200 --seconds=60 --argon2=light|owasp]`: the service as its own process on a fresh PostgreSQL
 * database (TEST_DATABASE_URL, as for `npm test`; Redis too when REDIS_URL is set), and `--clients`
 * concurrent clients sending mixed traffic for `--seconds`: register, login, refresh, upload, download,
 * metadata, transform, logout. Then every write that got a 2xx is checked (accounts exist, files are
 * byte-exact, the latest refresh token of each open session still works and a logged-out one does not),
 * and the run reports requests, 5xx, lost writes, p50/p99 per route and the service's memory (sampled
 * every second; the trend is the slope of the second half). It only talks to 127.0.0.1, stops by itself
 * (a hard bound of 9 minutes), and exits 1 on any 5xx, request without an answer or lost write.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import pg from 'pg';
import sharp from 'sharp';
import { multipartBody } from '../test/helpers/multipart.ts';
import { freshDatabase, postgresUrl, quantile, RssSampler, startService } from './reliability-service.ts';

const args = process.argv.slice(2);
const flag = (name: string, dflt: string) =>
  args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
const CLIENTS = Number(flag('clients', '200'));
const SECONDS = Number(flag('seconds', '60'));
/**
 * `light` (the default): argon2id with 4 MiB and one pass, so that the minute exercises every route
 * instead of queueing behind the password hasher (OWASP's 19 MiB and two passes cost tens of
 * milliseconds of a core per sign-in: bench/ measures that). `owasp`: the production defaults.
 */
const ARGON2 = flag('argon2', 'light');
const ADMIN_SECRET = randomBytes(24).toString('hex');
const log = (m: string) => process.stdout.write(`[soak] ${m}\n`);

const adminUrl = postgresUrl();
if (!adminUrl) {
  process.stderr.write(
    'npm run soak needs PostgreSQL: set TEST_DATABASE_URL to a server whose user may create databases, as for\n' +
      'npm test (README, "Test it"), e.g.\n' +
      '  TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run soak\n' +
      'The run creates a database of its own there and drops it at the end.\n',
  );
  process.exit(2);
}
const hardStop = setTimeout(() => {
  log('FAILED: the run passed its 9-minute bound');
  process.exit(1);
}, 9 * 60_000);
hardStop.unref();

// --- HTTP ------------------------------------------------------------------------------------------

interface Answer {
  status: number;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS + 10 });
let base = '';

function call(
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: Buffer | string; json?: unknown } = {},
): Promise<Answer> {
  const body = opts.json !== undefined ? JSON.stringify(opts.json) : opts.body;
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.json !== undefined) headers['content-type'] = 'application/json';
  if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: url.pathname + url.search,
        headers,
        agent,
        timeout: 60_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }),
        );
        res.on('error', reject);
      },
    );
    r.on('timeout', () => r.destroy(new Error('no answer within 60 s')));
    r.on('error', reject);
    r.end(body);
  });
}

// --- tallies ---------------------------------------------------------------------------------------

const latencies = new Map<string, number[]>();
const statuses = new Map<string, Map<number, number>>();
const fiveHundreds: string[] = [];
const noAnswer: string[] = [];
let requests = 0;

/** One request of the mix, timed and tallied under `route`. */
async function timed(route: string, send: () => Promise<Answer>): Promise<Answer | undefined> {
  const t0 = performance.now();
  let answer: Answer | undefined;
  try {
    answer = await send();
  } catch (err) {
    noAnswer.push(`${route}: ${(err as Error).message}`);
  }
  requests++;
  if (!latencies.has(route)) latencies.set(route, []);
  latencies.get(route)?.push(performance.now() - t0);
  if (answer) {
    const m = statuses.get(route) ?? new Map<number, number>();
    m.set(answer.status, (m.get(answer.status) ?? 0) + 1);
    statuses.set(route, m);
    if (answer.status >= 500)
      fiveHundreds.push(`${route}: ${answer.status} ${answer.body.toString('utf8').slice(0, 300)}`);
  }
  return answer;
}

// --- what was written, to check afterwards -----------------------------------------------------------

interface Account {
  email: string;
  password: string;
  userId: string;
  jwt: string;
}
interface Session {
  account: Account;
  refreshToken: string;
  open: boolean;
}
const accounts: Account[] = [];
const sessions: Session[] = [];
const files: { path: string; sha256: string; size: number }[] = [];
const corruptDownloads: string[] = [];

// --- one client ------------------------------------------------------------------------------------

let image: Buffer;

async function register(): Promise<Session | undefined> {
  const email = `soak-${randomBytes(8).toString('hex')}@example.com`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const a = await timed('POST /auth/register', () =>
    call('POST', '/auth/register', { json: { email, password, cookie: false } }),
  );
  if (a?.status !== 200) return undefined;
  const body = JSON.parse(a.body.toString('utf8')) as {
    jwt_token: string;
    refresh_token: string;
    user: { id: string };
  };
  const account = { email, password, userId: body.user.id, jwt: body.jwt_token };
  accounts.push(account);
  const session = { account, refreshToken: body.refresh_token, open: true };
  sessions.push(session);
  return session;
}

async function login(account: Account): Promise<Session | undefined> {
  const a = await timed('POST /auth/login', () =>
    call('POST', '/auth/login', {
      json: { email: account.email, password: account.password, cookie: false },
    }),
  );
  if (a?.status !== 200) return undefined;
  const body = JSON.parse(a.body.toString('utf8')) as { jwt_token: string; refresh_token: string };
  account.jwt = body.jwt_token;
  const session = { account, refreshToken: body.refresh_token, open: true };
  sessions.push(session);
  return session;
}

async function client(deadline: number, rnd: () => number): Promise<void> {
  let session = await register();
  const own: { path: string; sha256: string; bytes: Buffer }[] = [];
  let picture: string | undefined;
  while (Date.now() < deadline) {
    if (!session) {
      session = await register();
      // A new account: the files of the previous one are not its own to read (403 by the rules).
      own.length = 0;
      picture = undefined;
      continue;
    }
    const { account } = session;
    const auth = { authorization: `Bearer ${account.jwt}` };
    const roll = rnd();
    if (roll < 0.2) {
      // Upload: a new path each time, so the latest write of every path is the one that must be there.
      const isImage = picture === undefined || rnd() < 0.1;
      const bytes = isImage ? image : randomBytes(1024 + Math.floor(rnd() * 63 * 1024));
      const path = `user/${account.userId}/${randomBytes(6).toString('hex')}.${isImage ? 'png' : 'bin'}`;
      const form = multipartBody([
        {
          name: 'file',
          filename: path.slice(path.lastIndexOf('/') + 1),
          type: isImage ? 'image/png' : 'application/octet-stream',
          data: bytes,
        },
      ]);
      const a = await timed('POST /storage/o/*', () =>
        call('POST', `/storage/o/${path}`, { headers: { ...form.headers, ...auth }, body: form.payload }),
      );
      if (a?.status === 200) {
        const sha256 = createHash('sha256').update(bytes).digest('hex');
        files.push({ path, sha256, size: bytes.length });
        own.push({ path, sha256, bytes });
        if (isImage) picture = path;
      }
    } else if (roll < 0.4 && own.length > 0) {
      const f = own[Math.floor(rnd() * own.length)] as (typeof own)[number];
      const a = await timed('GET /storage/o/*', () => call('GET', `/storage/o/${f.path}`, { headers: auth }));
      if (a?.status === 200 && createHash('sha256').update(a.body).digest('hex') !== f.sha256) {
        corruptDownloads.push(f.path);
      }
    } else if (roll < 0.5 && own.length > 0) {
      const f = own[Math.floor(rnd() * own.length)] as (typeof own)[number];
      await timed('GET /storage/m/*', () => call('GET', `/storage/m/${f.path}`, { headers: auth }));
    } else if (roll < 0.6 && picture) {
      const w = 8 + Math.floor(rnd() * 40);
      await timed('GET /storage/o/* (transform)', () =>
        call('GET', `/storage/o/${picture}?w=${w}&f=${rnd() < 0.5 ? 'webp' : 'jpeg'}`, { headers: auth }),
      );
    } else if (roll < 0.8) {
      const a = await timed('GET /auth/token/refresh', () =>
        call('GET', `/auth/token/refresh?refresh_token=${encodeURIComponent(session?.refreshToken ?? '')}`),
      );
      if (a?.status === 200) {
        const body = JSON.parse(a.body.toString('utf8')) as { jwt_token: string; refresh_token: string };
        session.refreshToken = body.refresh_token;
        account.jwt = body.jwt_token;
      }
    } else if (roll < 0.9) {
      const next = await login(account);
      if (next) session = next;
    } else {
      const a = await timed('POST /auth/logout', () =>
        call('POST', `/auth/logout?refresh_token=${encodeURIComponent(session?.refreshToken ?? '')}`, {
          json: {},
        }),
      );
      if (a?.status === 204) session.open = false;
      // Signed out: the next round signs in again (or, one time in three, a new account registers).
      session = rnd() < 0.33 ? undefined : await login(account);
    }
  }
}

/** A small seeded generator per client, so runs are comparable. */
function seeded(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// --- the run ---------------------------------------------------------------------------------------

const db = await freshDatabase(adminUrl, 'gatehouse_soak');
let failed = false;
let service: Awaited<ReturnType<typeof startService>> | undefined;
try {
  service = await startService({
    DATABASE_URL: db.url,
    ...(process.env['REDIS_URL'] ? { REDIS_URL: process.env['REDIS_URL'] } : {}),
    // Load from one address: the limits would answer most of it with 429.
    RATE_LIMIT_ENABLED: 'false',
    HASURA_GRAPHQL_ADMIN_SECRET: ADMIN_SECRET,
    // Every client may wait for a hash at once; the default line (64 per thread) sheds the excess with
    // 503 PASSWORD_HASHING_BUSY by design, which is overload protection, not what this run measures.
    PASSWORD_HASH_QUEUE: String(CLIENTS + 50),
    // Likewise the transform queue: shedding load with 503 IMAGE_QUEUE_FULL is by design, not what this measures.
    IMAGE_QUEUE_LIMIT: String(CLIENTS + 50),
    DATABASE_POOL_SIZE: '20',
    ...(ARGON2 === 'owasp' ? {} : { ARGON2_MEMORY_COST: '4096', ARGON2_TIME_COST: '1' }),
  });
  base = service.url;
  log(
    `service pid ${service.pid} at ${service.url}, PostgreSQL${process.env['REDIS_URL'] ? ' and Redis' : ''}; ` +
      `${CLIENTS} clients for ${SECONDS} s, ${ARGON2} argon2 parameters`,
  );
  image = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#2a6' } })
    .png()
    .toBuffer();
  const rss = new RssSampler(service.pid, 1000);
  rss.start();
  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(deadline, seeded(i + 1))));
  const elapsed = (Date.now() - started) / 1000;
  rss.stop();
  const mem = rss.summary();

  // Lost writes.
  log(`verifying ${accounts.length} accounts, ${files.length} files, ${sessions.length} sessions`);
  const lost: string[] = [];
  const check = new pg.Client({ connectionString: db.url });
  await check.connect();
  try {
    const { rows } = await check.query<{ email: string }>(
      'SELECT email::text FROM auth.accounts WHERE email = ANY($1::text[])',
      [accounts.map((a) => a.email)],
    );
    const present = new Set(rows.map((r) => r.email.toLowerCase()));
    for (const a of accounts) if (!present.has(a.email.toLowerCase())) lost.push(`account ${a.email}`);
  } finally {
    await check.end();
  }
  for (const a of accounts.slice(0, 10)) {
    const r = await call('POST', '/auth/login', {
      json: { email: a.email, password: a.password, cookie: false },
    });
    if (r.status !== 200) lost.push(`sign-in of ${a.email}: ${r.status}`);
  }
  for (let i = 0; i < files.length; i += 20) {
    await Promise.all(
      files.slice(i, i + 20).map(async (f) => {
        const r = await call('GET', `/storage/o/${f.path}`, { headers: { 'x-admin-secret': ADMIN_SECRET } });
        if (r.status !== 200) lost.push(`file ${f.path}: ${r.status}`);
        else if (createHash('sha256').update(r.body).digest('hex') !== f.sha256)
          lost.push(`file ${f.path}: other bytes`);
      }),
    );
  }
  let liveChecked = 0;
  let endedChecked = 0;
  for (let i = 0; i < sessions.length; i += 20) {
    await Promise.all(
      sessions.slice(i, i + 20).map(async (s) => {
        const r = await call(
          'GET',
          `/auth/token/refresh?refresh_token=${encodeURIComponent(s.refreshToken)}`,
        );
        if (s.open) {
          liveChecked++;
          if (r.status !== 200)
            lost.push(`refresh token of an open session (${s.account.email}): ${r.status}`);
        } else {
          endedChecked++;
          if (r.status !== 401)
            lost.push(`a logged-out session still refreshes (${s.account.email}): ${r.status}`);
        }
      }),
    );
  }

  const health = (await call('GET', '/health')).status;
  const ready = (await call('GET', '/health/ready')).status;
  const exit = await service.stop();
  service = undefined;

  // Report.
  log(
    `${requests} requests in ${elapsed.toFixed(1)} s (${Math.round(requests / elapsed)}/s) from ${CLIENTS} clients`,
  );
  log('route                              requests     p50 ms    p99 ms    max ms   statuses');
  for (const [route, list] of [...latencies.entries()].sort()) {
    const sorted = [...list].sort((a, b) => a - b);
    const st = [...(statuses.get(route) ?? new Map()).entries()].map(([s, n]) => `${s}×${n}`).join(' ');
    log(
      `${route.padEnd(34)} ${String(list.length).padStart(8)} ${quantile(sorted, 0.5).toFixed(1).padStart(10)} ${quantile(sorted, 0.99).toFixed(1).padStart(9)} ${(sorted[sorted.length - 1] ?? 0).toFixed(1).padStart(9)}   ${st}`,
    );
  }
  log(
    `5xx: ${fiveHundreds.length}; without an answer: ${noAnswer.length}; corrupt downloads: ${corruptDownloads.length}`,
  );
  log(
    `lost writes: ${lost.length} (checked ${accounts.length} accounts, ${files.length} files byte for byte, ` +
      `${liveChecked} open sessions' latest refresh tokens, ${endedChecked} logged-out ones)`,
  );
  log(
    `service RSS: first ${mem.firstMb} MB, peak ${mem.peakMb} MB, last ${mem.lastMb} MB, second-half trend ${mem.secondHalfSlopeMbPerMin} MB/min`,
  );
  log(`after the run: /health ${health}, /health/ready ${ready}, exit on SIGTERM ${exit}`);
  for (const line of [...fiveHundreds, ...noAnswer, ...corruptDownloads, ...lost].slice(0, 20))
    log(`  ✖ ${line}`);
  failed =
    fiveHundreds.length > 0 ||
    noAnswer.length > 0 ||
    corruptDownloads.length > 0 ||
    lost.length > 0 ||
    health !== 204 ||
    ready !== 204 ||
    exit !== 0;
} catch (err) {
  log(`FAILED: ${(err as Error).stack}`);
  if (service) log(`service output:\n${service.errors.join('\n')}`);
  failed = true;
} finally {
  if (service) await service.stop();
  agent.destroy();
  await db.drop();
}
log(failed ? 'FAILED' : 'passed: no 5xx, no lost write');
process.exit(failed ? 1 : 0);
