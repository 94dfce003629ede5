/**
 * The service as an operator runs it: the real entry point in a child process, on embedded defaults
 * (no DATABASE_URL), in a temporary DATA_DIR. The starts share one DATA_DIR and run in order, because
 * the first start (initdb + migrations) is the slow one that the others reuse.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { openPglite } from '../../src/db/database.ts';
import { tempDir } from '../helpers/app.ts';
import { killIfRunning, REPO_ROOT, runNode, type ServiceProcess } from '../helpers/process.ts';

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
    assert.equal(pkg.scripts['start'], 'tsx src/main.ts');
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

    assert.deepEqual(await tablesIn(path.join(dataDir, 'db'), 'auth'), [
      'account_locales',
      'account_providers',
      'account_roles',
      'accounts',
      'providers',
      'refresh_tokens',
      'roles',
      'schema_migrations',
      'session_tokens',
      'tickets',
    ]);
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
    assert.match(intruder.stdout(), /cannot start: the embedded database in .* is in use by process \d+/);
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

  it('SIGTERM during a slow request lets it finish, refuses new requests, and exits 0', async () => {
    running = runNode(SLOW_SERVER, env);
    const address = await running.listening;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // A keep-alive connection that is idle when the signal arrives must not hold the shutdown open.
    const idle = new http.Agent({ keepAlive: true });
    assert.equal((await get(`${address}/health`, idle)).status, 204);

    const slow = get(`${address}/slow?ms=1500`, agent);
    await waitFor(() => running?.logs.some((l) => l['msg'] === 'slow request started') ?? false);
    const signalledAt = Date.now();
    running.child.kill('SIGTERM');
    await waitFor(
      () => running?.logs.some((l) => l['msg'] === 'shutting down: finishing in-flight requests') ?? false,
    );
    await assert.rejects(get(`${address}/health`), 'a new connection is refused while stopping');

    const res = await slow;
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { done: true, ms: 1500 });
    assert.equal(await running.exited, 0);
    assert.ok(Date.now() - signalledAt < 10_000, 'the process exits soon after the last request ends');
    assert.ok(running.logs.some((l) => l['msg'] === 'stopped'));
    agent.destroy();
    idle.destroy();
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

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
