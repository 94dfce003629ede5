/**
 * `npm run chaos`: the fault suite's faults, longer and repeated, against the real service process on
 * 127.0.0.1. A mixed load (register, refresh, upload, download) runs while, in turn, PostgreSQL's
 * connections are cut or refused (a TCP proxy in this process; the server itself is never touched), the
 * object store (s3rver, in this process) is stopped and restarted, Redis is refused (when REDIS_URL is
 * set), and the service is SIGKILLed and restarted. At the end every write that got a 2xx is checked.
 * Reports requests, answers by status, 5xx other than 503, and lost writes; exits 1 on any 5xx or loss.
 *
 * Settings (environment): CHAOS_SECONDS (default 120, at most 540), DATABASE_URL (a PostgreSQL whose
 * user may create databases; unset: the embedded database, whose faults are the kills only), REDIS_URL.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openPostgres } from '../src/db/database.ts';
import { HS_KEY } from '../test/helpers/accounts.ts';
import { tempDir } from '../test/helpers/app.ts';
import { killIfRunning, REPO_ROOT, runNode, type ServiceProcess } from '../test/helpers/process.ts';
import { startTcpProxy, type TcpProxy, targetOf } from '../test/helpers/tcp-proxy.ts';
import { startS3rver } from '../test/storage/helpers.ts';

const SECONDS = Math.min(540, Math.max(10, Number(process.env['CHAOS_SECONDS'] ?? 120)));
const PG = process.env['DATABASE_URL'];
const REDIS = process.env['REDIS_URL'];
const ADMIN = 'chaos-admin-secret';
const WORKERS = 8;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const counts = { requests: 0, cutOff: 0, byStatus: {} as Record<number, number> };
const serverErrors: string[] = [];
const faults: Record<string, number> = {};
const uploads = new Map<string, string>();
const accounts: { email: string; password: string }[] = [];

async function main() {
  const dataDir = tempDir('gatehouse-chaos-');
  const s3 = await startS3rver();
  let pgProxy: TcpProxy | undefined;
  let redisProxy: TcpProxy | undefined;
  let dbName: string | undefined;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    JWT_ALGORITHM: 'HS256',
    JWT_KEY: HS_KEY,
    HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
    AUTO_ACTIVATE_NEW_USERS: 'true',
    MAX_REQUESTS: '100000000',
    RATE_LIMIT_REGISTER_MAX: '100000000',
    RATE_LIMIT_REFRESH_MAX: '100000000',
    RATE_LIMIT_LOGIN_MAX: '100000000',
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: 'chaos',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    S3_SSL_ENABLED: 'false',
  };
  if (PG) {
    dbName = `gatehouse_chaos_${randomBytes(4).toString('hex')}`;
    const admin = openPostgres(PG, 1);
    await admin.exec(`CREATE DATABASE ${dbName}`);
    await admin.close();
    const url = new URL(PG);
    url.pathname = `/${dbName}`;
    pgProxy = await startTcpProxy(targetOf(url.toString()));
    env['DATABASE_URL'] = pgProxy.url(url.toString());
  }
  if (REDIS) {
    redisProxy = await startTcpProxy(targetOf(REDIS));
    env['REDIS_URL'] = redisProxy.url(REDIS);
  }

  let service: ServiceProcess = runNode(path.join(REPO_ROOT, 'src/main.ts'), env);
  let base = await service.listening;
  const started = Date.now();
  const until = started + SECONDS * 1000;
  process.stdout.write(
    `chaos: ${SECONDS} s, ${WORKERS} workers, ${PG ? 'PostgreSQL' : 'PGlite'}, s3rver, ${REDIS ? 'Redis' : 'no Redis'}\n`,
  );

  async function call(route: string, url: string, init?: RequestInit): Promise<Response | undefined> {
    try {
      const r = await fetch(`${base}${url}`, { ...init, signal: AbortSignal.timeout(30_000) });
      counts.requests += 1;
      counts.byStatus[r.status] = (counts.byStatus[r.status] ?? 0) + 1;
      if (r.status >= 500 && r.status !== 503)
        serverErrors.push(`${route} ${r.status} ${(await r.clone().text()).slice(0, 200)}`);
      if (r.status === 503 && !r.headers.get('retry-after'))
        serverErrors.push(`${route} 503 without Retry-After`);
      return r;
    } catch {
      counts.cutOff += 1; // the service was killed (or restarting): no answer, outcome unknown
      await sleep(250);
      return undefined;
    }
  }

  async function worker(w: number) {
    let refresh: string | undefined;
    for (let i = 0; Date.now() < until; i++) {
      const pick = i % 4;
      if (pick === 0 || !refresh) {
        const who = { email: `chaos-${w}-${i}-${Date.now()}@example.com`, password: 'correct horse battery' };
        const r = await call('register', '/auth/register', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...who, cookie: false }),
        });
        if (r?.status === 200) {
          accounts.push(who);
          refresh = ((await r.json()) as { refresh_token: string }).refresh_token;
        } else await r?.body?.cancel();
      } else if (pick === 1) {
        const r = await call('refresh', `/auth/token/refresh?refresh_token=${encodeURIComponent(refresh)}`);
        if (r?.status === 200) refresh = ((await r.json()) as { refresh_token: string }).refresh_token;
        else {
          await r?.body?.cancel();
          if (r?.status === 401) refresh = undefined; // a cut-off refresh may have rotated it
        }
      } else if (pick === 2) {
        const key = `public/chaos/${w}-${i}.bin`;
        const body = randomBytes(randomInt(1_000, 300_000));
        const r = await call('upload', `/storage/o/${key}`, {
          method: 'POST',
          headers: { 'content-type': 'application/octet-stream', 'x-admin-secret': ADMIN },
          body,
        });
        if (r?.status === 200) uploads.set(key, sha(body));
        await r?.body?.cancel();
      } else {
        const keys = [...uploads.keys()];
        const key = keys[randomInt(Math.max(1, keys.length))];
        if (!key) continue;
        const r = await call('download', `/storage/o/${key}`, { headers: { 'x-admin-secret': ADMIN } });
        if (r?.status === 200) {
          const got = sha(Buffer.from(await r.arrayBuffer()));
          if (got !== uploads.get(key)) serverErrors.push(`download ${key}: bytes differ`);
        } else await r?.body?.cancel();
      }
    }
  }

  const fault = (name: string) => {
    faults[name] = (faults[name] ?? 0) + 1;
  };
  async function chaos() {
    const kinds = [
      ...(pgProxy ? ['pg-drop'] : []),
      's3',
      ...(redisProxy ? ['redis'] : []),
      ...(pgProxy ? ['pg-refuse'] : []),
      'kill',
    ];
    for (let n = 0; Date.now() < until - 8_000; n++) {
      await sleep(randomInt(3_000, 6_000));
      const kind = kinds[n % kinds.length] as string;
      fault(kind);
      if (kind === 'kill') {
        service.child.kill('SIGKILL');
        await service.exited;
        service = runNode(path.join(REPO_ROOT, 'src/main.ts'), env);
        base = await service.listening;
      } else if (kind === 's3') {
        await s3.stop();
        await sleep(2_000);
        await s3.start();
      } else if (kind === 'pg-drop') pgProxy?.dropAll();
      else if (kind === 'pg-refuse') {
        await pgProxy?.refuse();
        pgProxy?.dropAll();
        await sleep(2_000);
        await pgProxy?.accept();
      } else if (kind === 'redis') {
        await redisProxy?.refuse();
        redisProxy?.dropAll();
        await sleep(2_000);
        await redisProxy?.accept();
      }
    }
  }

  await Promise.all([chaos(), ...Array.from({ length: WORKERS }, (_, w) => worker(w))]);

  // Lost writes: every 2xx upload must read back byte-exact, every 2xx registration must sign in.
  let lostUploads = 0;
  for (const [key, hash] of uploads) {
    const r = await fetch(`${base}/storage/o/${key}`, { headers: { 'x-admin-secret': ADMIN } });
    if (r.status !== 200 || sha(Buffer.from(await r.arrayBuffer())) !== hash) lostUploads += 1;
  }
  let lostAccounts = 0;
  for (const who of accounts) {
    const r = await fetch(`${base}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...who, cookie: false }),
    });
    await r.body?.cancel();
    if (r.status !== 200) lostAccounts += 1;
  }

  service.child.kill('SIGTERM');
  await service.exited;
  killIfRunning(service);
  await pgProxy?.close();
  await redisProxy?.close();
  await s3.close();
  if (PG && dbName) {
    const admin = openPostgres(PG, 1);
    await admin.exec(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.close();
  }
  rmSync(dataDir, { recursive: true, force: true });

  const report = {
    seconds: Math.round((Date.now() - started) / 1000),
    database: PG ? 'postgres' : 'pglite',
    redis: Boolean(REDIS),
    answered: counts.requests,
    byStatus: counts.byStatus,
    noAnswerDuringKills: counts.cutOff,
    faults,
    serverErrors: serverErrors.length,
    writes: { uploads: uploads.size, accounts: accounts.length },
    lostWrites: lostUploads + lostAccounts,
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  for (const e of serverErrors.slice(0, 20)) process.stdout.write(`5xx: ${e}\n`);
  process.exit(serverErrors.length === 0 && report.lostWrites === 0 ? 0 : 1);
}

// Bounded whatever happens: the run stops by itself.
setTimeout(
  () => {
    process.stderr.write('chaos: over its time bound, stopping\n');
    process.exit(2);
  },
  (SECONDS + 120) * 1000,
).unref();

await main();
