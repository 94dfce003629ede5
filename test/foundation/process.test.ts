/**
 * The service as an operator runs it: the real entry point in a child process, on embedded defaults
 * (no DATABASE_URL), in a temporary DATA_DIR. The starts share one DATA_DIR and run in order, because
 * the first start (initdb + migrations) is the slow one that the others reuse.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openPglite } from '../../src/db/database.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import {
  descendants,
  isRunning,
  killIfRunning,
  REPO_ROOT,
  runNode,
  type ServiceProcess,
  watch,
} from '../helpers/process.ts';
import { runsHere } from '../helpers/requirements.ts';

const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const SLOW_SERVER = path.join(REPO_ROOT, 'test/foundation/fixtures/slow-server.ts');

function get(
  url: string,
  agent?: http.Agent,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on('error', reject);
  });
}

async function tablesIn(dir: string, schema: string): Promise<string[]> {
  const db = await openPglite(dir);
  try {
    const { rows } = await db.query<{ table_name: string }>(
      'test-tables',
      'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
      [schema],
    );
    return rows.map((r) => r.table_name);
  } finally {
    await db.close();
  }
}

describe('the service process on embedded defaults', () => {
  const dataDir = tempDir('gatehouse-process-');
  const env = { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' };
  let running: ServiceProcess | undefined;
  after(() => {
    killIfRunning(running);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('README starts the service with `npm ci && npm start`, and `start` runs src/main.ts', () => {
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1]?.trim();
    assert.equal(firstBlock, 'npm ci && npm start');
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    // exec: npm runs scripts through sh, which would die on SIGTERM and leave node running (see below).
    assert.equal(pkg.scripts['start'], 'exec node --import tsx src/main.ts');
    // The same for the other scripts that run the service: npm's signal reaches the process itself.
    assert.match(pkg.scripts['dev'] ?? '', /^exec tsx watch /);
    assert.match(pkg.scripts['start:prod'] ?? '', /^exec node dist\/main\.js$/);
  });

  it('first start creates the auth tables in DATA_DIR/db, answers /health with 204 and exits 0 on SIGTERM', async () => {
    running = runNode(MAIN, env);
    const address = await running.listening;
    const health = await get(`${address}/health`);
    assert.equal(health.status, 204);
    assert.equal(health.body, '');
    assert.ok(
      running.logs.some((l) => l['msg'] === 'database schema migrated'),
      'the first start applies the migrations',
    );
    running.child.kill('SIGTERM');
    assert.equal(await running.exited, 0);

    // HBP's tables (contract §10.3) and the migrations record; features add tables of their own.
    const authTables = await tablesIn(path.join(dataDir, 'db'), 'auth');
    for (const t of [
      'account_providers',
      'account_roles',
      'accounts',
      'providers',
      'refresh_tokens',
      'roles',
      'schema_migrations',
    ]) {
      assert.ok(authTables.includes(t), `auth.${t} exists`);
    }
    assert.deepEqual(await tablesIn(path.join(dataDir, 'db'), 'public'), ['users']);
  });

  it('second start reuses the database: no migration runs and rows written in between are kept', async () => {
    const db = await openPglite(path.join(dataDir, 'db'));
    await db.query('test-add-role', "INSERT INTO auth.roles (role) VALUES ('kept-between-starts')");
    const before = await db.query('test-migrations', 'SELECT * FROM auth.schema_migrations ORDER BY id');
    await db.close();

    running = runNode(MAIN, env);
    const address = await running.listening;
    assert.equal((await get(`${address}/health`)).status, 204);
    assert.equal((await get(`${address}/health/ready`)).status, 204);
    assert.ok(!running.logs.some((l) => l['msg'] === 'database schema migrated'));

    // A second process on the same DATA_DIR would corrupt the embedded database: it must refuse.
    const intruder = runNode(MAIN, env);
    assert.equal(await intruder.exited, 1);
    assert.match(
      intruder.stderr(),
      /^Cannot start: the embedded database in .* is in use by process \d+; run one instance per DATA_DIR/,
    );
    assert.equal((await get(`${address}/health/ready`)).status, 204, 'the first instance is unharmed');

    running.child.kill('SIGTERM');
    assert.equal(await running.exited, 0);

    const again = await openPglite(path.join(dataDir, 'db'));
    try {
      const roles = await again.query(
        'test-role',
        "SELECT 1 FROM auth.roles WHERE role = 'kept-between-starts'",
      );
      assert.equal(roles.rowCount, 1);
      const afterRows = await again.query(
        'test-migrations',
        'SELECT * FROM auth.schema_migrations ORDER BY id',
      );
      assert.deepEqual(afterRows.rows, before.rows);
    } finally {
      await again.close();
    }
  });

  it('SIGTERM during a slow request and a streamed answer lets both finish, refuses new requests, and exits 0', async () => {
    running = runNode(SLOW_SERVER, env);
    const address = await running.listening;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // A keep-alive connection that is idle when the signal arrives must not hold the shutdown open.
    const idle = new http.Agent({ keepAlive: true });
    assert.equal((await get(`${address}/health`, idle)).status, 204);

    const streamAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const slow = get(`${address}/slow?ms=1500`, agent);
    const stream = get(`${address}/stream?ms=1500`, streamAgent);
    await waitFor(() => running?.logs.some((l) => l['msg'] === 'slow request started') ?? false);
    await waitFor(() => running?.logs.some((l) => l['msg'] === 'stream started') ?? false);
    const signalledAt = Date.now();
    running.child.kill('SIGTERM');
    await waitFor(
      () => running?.logs.some((l) => l['msg'] === 'shutting down: finishing in-flight requests') ?? false,
    );
    await assert.rejects(get(`${address}/health`), 'a new connection is refused while stopping');

    const res = await slow;
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { done: true, ms: 1500 });
    assert.equal((await stream).body, 'first,last', 'a streamed answer that had begun is completed');
    assert.equal(await running.exited, 0);
    assert.ok(Date.now() - signalledAt < 20_000, 'the process exits well before the 25 s shutdown timeout');
    assert.ok(running.logs.some((l) => l['msg'] === 'stopped'));
    agent.destroy();
    streamAgent.destroy();
    idle.destroy();
  });

  it('gives up with exit 1 when in-flight requests outlast the shutdown timeout', async () => {
    running = runNode(SLOW_SERVER, { ...env, FIXTURE_SHUTDOWN_TIMEOUT_MS: '300' });
    const address = await running.listening;
    const slow = get(`${address}/slow?ms=30000`).catch((err: Error) => err);
    await waitFor(() => running?.logs.some((l) => l['msg'] === 'slow request started') ?? false);
    running.child.kill('SIGTERM');
    assert.equal(await running.exited, 1);
    assert.ok(running.logs.some((l) => String(l['msg']).startsWith('shutdown timed out')));
    assert.ok((await slow) instanceof Error, 'the unfinished request was cut off');
  });

  it('exits 1 with one message naming every bad setting, before opening anything', async () => {
    const p = runNode(MAIN, {
      ...env,
      PORT: 'abc',
      JWT_ALGORITHM: 'foo',
      DATABASE_URL: 'notaurl',
      AUTH_ENABLED: 'maybe',
    });
    assert.equal(await p.exited, 1);
    const message = p.stderr();
    assert.match(message, /^Invalid configuration:\n/);
    assert.equal(message.match(/Invalid configuration/g)?.length, 1, 'one message');
    assert.match(message, /- PORT must be a whole number, got "abc"/);
    assert.match(message, /- JWT_ALGORITHM must be one of HS256, .*, got "foo"/);
    assert.match(message, /- DATABASE_URL is not a valid URL/);
    assert.match(message, /- AUTH_ENABLED must be true or false, got "maybe"/);
    assert.doesNotMatch(message, /notaurl/, 'a secret setting is never echoed');
    assert.equal(p.stdout(), '', 'nothing was started');
  });
});

describe('starting and stopping the way a newcomer does', () => {
  const dataDir = tempDir('gatehouse-newcomer-');
  const started: ServiceProcess[] = [];
  after(() => {
    for (const p of started) killIfRunning(p);
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`\`npm start\` listens on 127.0.0.1 by default, and ${signal} to npm stops every process it started`, async () => {
      const npm = watch(
        spawn('npm', ['start'], {
          cwd: REPO_ROOT,
          // No HOST: the default is under test.
          env: {
            PATH: process.env['PATH'] ?? '',
            HOME: process.env['HOME'] ?? dataDir,
            DATA_DIR: dataDir,
            PORT: '0',
            LOG_LEVEL: 'info',
            npm_config_update_notifier: 'false',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      started.push(npm);
      const address = await npm.listening;
      assert.match(
        address,
        /^http:\/\/127\.0\.0\.1:\d+$/,
        'outside production only this machine can connect',
      );
      assert.equal((await get(`${address}/health`)).status, 204);
      const tree = descendants(npm.child.pid as number);
      assert.ok(tree.length > 0, 'npm started the service as a child');

      npm.child.kill(signal);
      await npm.exited;
      await waitFor(() => tree.every((pid) => !isRunning(pid)), 15_000).catch(() => {
        const left = tree.filter(isRunning);
        for (const pid of left) process.kill(pid, 'SIGKILL');
        assert.fail(`processes ${left.join(', ')} outlived npm (killed now)`);
      });
      await assert.rejects(get(`${address}/health`), 'nothing answers on the port any more');
      assert.ok(
        npm.logs.some((l) => l['msg'] === 'stopped'),
        'the service stopped gracefully',
      );
    });
  }

  it('a port in use is one line on stderr that names the port and the fix, and exit 1', async () => {
    const blocker = http.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const p = runNode(MAIN, { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port) });
      started.push(p);
      assert.equal(await p.exited, 1);
      assert.equal(
        p.stderr(),
        `Cannot start: port ${port} on 127.0.0.1 is already in use by another program; stop it, or set PORT to a free port (PORT=0 picks one)\n`,
      );
      assert.doesNotMatch(p.stdout(), /"stack"|at .*\.ts:\d+/, 'no stack trace');
    } finally {
      blocker.close();
    }
  });

  it('reports a bad key together with a bad setting, before creating the database', async () => {
    const fresh = tempDir('gatehouse-badkey-');
    try {
      const p = runNode(MAIN, {
        DATA_DIR: fresh,
        HOST: '127.0.0.1',
        PORT: 'abc',
        JWT_ALGORITHM: 'RS256',
        JWT_KEY: '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----',
      });
      started.push(p);
      assert.equal(await p.exited, 1);
      const message = p.stderr();
      assert.match(message, /^Invalid configuration:\n/);
      assert.match(message, /- PORT must be a whole number, got "abc"/);
      assert.match(message, /- JWT_KEY is not a valid PEM private key/);
      assert.doesNotMatch(message, /bm90IGEga2V5/, 'the key is never echoed');
      assert.ok(!existsSync(path.join(fresh, 'db')), 'no embedded database was created');
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('a production start lists every missing setting at once, the signing key among them', async () => {
    const p = runNode(MAIN, { DATA_DIR: dataDir, NODE_ENV: 'production', PORT: '0' });
    started.push(p);
    assert.equal(await p.exited, 1);
    const message = p.stderr();
    for (const name of ['DATABASE_URL', 'COOKIE_SECRET', 'MFA_ENCRYPTION_KEY', 'JWT_KEY'])
      assert.match(message, new RegExp(`- ${name}\\b[^\\n]* required in production`), name);
    assert.equal(message.match(/Invalid configuration/g)?.length, 1, 'one message');
  });

  if (runsHere('postgres', 'a production start with a missing key leaves a fresh PostgreSQL untouched')) {
    it('a production start with a missing key leaves a fresh PostgreSQL database untouched', async () => {
      const t = await createTestDatabase('postgres', { empty: true });
      try {
        const p = runNode(MAIN, {
          DATA_DIR: dataDir,
          NODE_ENV: 'production',
          PORT: '0',
          DATABASE_URL: String(t.url),
          COOKIE_SECRET: 'c'.repeat(32),
          MFA_ENCRYPTION_KEY: 'm'.repeat(32),
        });
        started.push(p);
        assert.equal(await p.exited, 1);
        assert.match(p.stderr(), /- JWT_KEY \(a PEM private key\) or the file .* is required in production/);
        const { rows } = await t.db.query<{ n: number }>(
          'test-schemas',
          "SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = 'auth'",
        );
        assert.equal(rows[0]?.n, 0, 'no auth schema: nothing was migrated');
      } finally {
        await t.drop();
      }
    });
  }
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
