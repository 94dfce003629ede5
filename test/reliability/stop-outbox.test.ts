/**
 * Stopping the real service process while emails are on their way and sign-ins are in flight, then
 * starting it again on the same data, with a real SMTP server in the test process reached through a TCP
 * proxy that can turn into a host that accepts and never answers (a server "down" the slow way):
 *
 * 1. Ctrl-C in a terminal (or a supervisor signalling the process group) delivers SIGINT twice, tens of
 *    milliseconds apart at most; that is one graceful stop, not "exit without waiting": the in-flight sign-ins get their
 *    answers, the activation email whose delivery was stuck at the SMTP greeting is released, and the
 *    next start sends it at once.
 * 2. A sender killed with SIGKILL while it holds an email leaves it to another sender within 30 s
 *    (short leases renewed while a delivery runs, not one long lease). On PostgreSQL the other instance
 *    runs beside it when it is killed; on the embedded database (one process per DATA_DIR) it is the next
 *    start, and the email goes out at its first pass, or 30 s after the kill if it starts sooner.
 * 3. A single SIGTERM under sign-in load: every in-flight sign-in gets 200 or 401, none a 500 (the
 *    hashing pool closes after the requests that use it).
 *
 * Three starts in all (each costs seconds of tsx) on one DATA_DIR, on PostgreSQL when TEST_DATABASE_URL
 * is set, else on the embedded database.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { newEmail } from '../helpers/accounts.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { killIfRunning, REPO_ROOT, type ServiceProcess, watch } from '../helpers/process.ts';
import { findLink, startSmtp, type TestSmtp } from '../helpers/smtp.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const TSX = import.meta.resolve('tsx');
const POLL_MS = 5_000;
const PASSWORD = 'a long enough password 1';

/** The service as the leader of its own process group, so that a test can signal the whole group. */
function startService(env: Record<string, string>): ServiceProcess {
  const child: ChildProcess = spawn(process.execPath, ['--import', TSX, MAIN], {
    cwd: REPO_ROOT,
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  return watch(child);
}

/** One request on its own connection (no keep-alive: each sign-in below is in flight on its own). */
function post(address: string, route: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${address}${route}`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** How many sign-ins the service has received so far (Fastify's "incoming request" log lines). */
function signInsReceived(p: ServiceProcess): number {
  return p.logs.filter(
    (l) =>
      l['msg'] === 'incoming request' && (l['req'] as { url?: string } | undefined)?.url === '/auth/login',
  ).length;
}

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<number> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
  return Date.now() - start;
}

/** Sign-ins that hash: the activated account with its password (200) and unknown addresses (401). */
function signIns(address: string, email: string, count: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      post(address, '/auth/login', {
        email: i % 2 === 0 ? email : newEmail('nobody'),
        password: PASSWORD,
      }).then(
        (r) => r.status,
        (err: Error) => `no answer: ${err.message}` as unknown as number,
      ),
    ),
  );
}

describe('stopping the service with emails on their way and sign-ins in flight', () => {
  const dataDir = tempDir('gatehouse-stop-outbox-');
  let smtp: TestSmtp;
  let proxy: TcpProxy;
  const started: ServiceProcess[] = [];
  let env: Record<string, string>;
  const active = newEmail('active');
  // Several instances at once need PostgreSQL; the embedded database runs one process at a time.
  const shared = Boolean(process.env['TEST_DATABASE_URL']);
  let database: TestDatabase | undefined;

  before(async () => {
    if (shared) database = await createTestDatabase('postgres', { empty: true });
    smtp = await startSmtp();
    proxy = await startTcpProxy({ host: '127.0.0.1', port: smtp.port });
    env = {
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      AUTO_ACTIVATE_NEW_USERS: 'false',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: String(proxy.port),
      SMTP_SECURE: 'false',
      // A silent server holds a delivery at the greeting for this long: longer than each scenario.
      SMTP_TIMEOUT_MS: '25000',
      EMAIL_POLL_INTERVAL_MS: String(POLL_MS),
      RATE_LIMIT_ENABLED: 'false',
      ...(database?.url ? { DATABASE_URL: database.url } : {}),
    };
  });
  after(async () => {
    for (const p of started) killIfRunning(p);
    await proxy?.close();
    await smtp?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('SIGINT twice to the process group is one graceful stop: sign-ins answered, the stuck email released and sent at the next start', async () => {
    const first = startService(env);
    started.push(first);
    const address = await first.listening;
    // An account that can sign in, activated through its emailed link.
    assert.equal(
      (await post(address, '/auth/register', { email: active, password: PASSWORD })).status < 300,
      true,
    );
    await waitFor('the activation email', () => smtp.to(active).length === 1, 15_000);
    const link = findLink(smtp.last(active).text, '/auth/activate');
    const activation = await fetch(`${address}${link.pathname}${link.search}`, { redirect: 'manual' });
    assert.ok(activation.status < 400, `activation answered ${activation.status}`);

    // The SMTP host now accepts connections and never greets: the next delivery hangs at the greeting.
    proxy.mode = 'blackhole';
    const accepted = proxy.accepted;
    const waiting = newEmail('waiting');
    assert.ok((await post(address, '/auth/register', { email: waiting, password: PASSWORD })).status < 300);
    await waitFor('the delivery reaching the silent host', () => proxy.accepted > accepted, 10_000);

    const before = signInsReceived(first);
    const answers = signIns(address, active, 24);
    await waitFor('the sign-ins reaching the service', () => signInsReceived(first) >= before + 24, 10_000);
    // What Ctrl-C does under `npm start`: the terminal signals the group, and npm forwards its copy
    // milliseconds later. (Two signals sent closer than about 2 ms apart may reach node as one.)
    const pid = first.child.pid as number;
    process.kill(-pid, 'SIGINT');
    await sleep(50);
    process.kill(-pid, 'SIGINT');

    assert.equal(await first.exited, 0, `exit code (log: ${first.stdout().slice(-2000)})`);
    assert.ok(
      first.logs.some((l) => l['msg'] === 'stopped' && l['graceful'] === true),
      'the log says the stop was graceful',
    );
    assert.ok(!first.logs.some((l) => String(l['msg']).startsWith('second signal')));
    const statuses = await answers;
    assert.ok(
      statuses.every((s) => s === 200 || s === 401),
      `every sign-in has its answer: ${statuses.join(', ')}`,
    );
    assert.ok(statuses.includes(200), `some sign-ins were in flight and succeeded: ${statuses.join(', ')}`);
    assert.equal(smtp.to(waiting).length, 0, 'not sent by the stopped process');

    // The SMTP host is back; the next start sends the released email at once, within one poll interval.
    proxy.mode = 'forward';
    const second = startService(env);
    started.push(second);
    await second.listening;
    const tookMs = await waitFor(
      'the released activation email',
      () => smtp.to(waiting).length === 1,
      30_000,
    );
    assert.ok(tookMs <= POLL_MS, `sent ${tookMs} ms after the start (one poll interval is ${POLL_MS} ms)`);

    // 2. This sender now holds an email at a silent host, and is killed.
    proxy.mode = 'blackhole';
    const acceptedBefore = proxy.accepted;
    const orphan = newEmail('orphan');
    assert.ok(
      (await post(await second.listening, '/auth/register', { email: orphan, password: PASSWORD })).status <
        300,
    );
    await waitFor('the delivery reaching the silent host', () => proxy.accepted > acceptedBefore, 10_000);
    // Another instance beside it (PostgreSQL), or the next start once it is dead (embedded database).
    const third = shared ? startService(env) : undefined;
    if (third) await third.listening;
    second.child.kill('SIGKILL');
    const killedAt = Date.now();
    await second.exited;
    proxy.dropAll();
    proxy.mode = 'forward';
    const next = third ?? startService(env);
    started.push(next);
    const thirdAddress = await next.listening;
    const listeningMs = Date.now() - killedAt;

    // 3. The other sender delivers it within 30 s of the kill (or at the first pass of a start that
    // took longer); then a single SIGTERM under sign-in load.
    await waitFor('the orphaned email', () => smtp.to(orphan).length === 1, 60_000);
    const afterKillMs = Date.now() - killedAt;
    assert.ok(
      afterKillMs < Math.max(30_000, listeningMs + POLL_MS),
      `delivered ${afterKillMs} ms after the sender was killed (the other sender listened after ${listeningMs} ms)`,
    );

    const received = signInsReceived(next);
    const load = signIns(thirdAddress, active, 24);
    await waitFor('the sign-ins reaching the service', () => signInsReceived(next) >= received + 24, 10_000);
    next.child.kill('SIGTERM');
    assert.equal(await next.exited, 0);
    const loadStatuses = await load;
    assert.ok(
      loadStatuses.every((s) => s === 200 || s === 401),
      `every sign-in has its answer, none a 500: ${loadStatuses.join(', ')}`,
    );
    assert.ok(loadStatuses.includes(200), `some sign-ins were in flight: ${loadStatuses.join(', ')}`);
    assert.ok(!next.logs.some((l) => /hashing pool is closed/.test(JSON.stringify(l))));
  });
});
