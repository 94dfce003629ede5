/**
 * The CLI while the development service runs (issue 26): the embedded database is the service's, so the
 * CLI forwards its command to the service over DATA_DIR/cli.sock, which runs it with its own settings and
 * database. A reset link then names the service's own port, whatever PORT the CLI's environment has.
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { configFrom } from '../../src/config.ts';
import { type RunningServer, startServer, stopServer } from '../../src/server.ts';
import { newEmail } from '../helpers/accounts.ts';
import { tempDir } from '../helpers/app.ts';
import { runGatehouse, runGatehouseHere } from '../helpers/cli.ts';

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('gatehouse beside the running development service', () => {
  const dataDir = tempDir('gh-cli-');
  let server: RunningServer;
  let port: number;
  const email = newEmail('beside');
  before(async () => {
    port = await freePort();
    server = await startServer(
      configFrom({
        DATA_DIR: dataDir,
        CUSTOM_DIR: path.join(dataDir, 'custom'),
        PORT: port,
        LOST_PASSWORD_ENABLED: true,
        ARGON2_MEMORY_COST: 1024,
        ARGON2_TIME_COST: 1,
      }),
      { log: pino({ level: 'silent' }) },
    );
    const res = await fetch(`${server.address}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'a long enough password' }),
    });
    assert.equal(res.status, 200, await res.text());
  });
  after(() => stopServer(server));

  it('serves the CLI socket to its owner only', () => {
    const file = path.join(dataDir, 'cli.sock');
    assert.ok(statSync(file).isSocket());
    assert.equal(statSync(file).mode & 0o777, 0o600);
  });

  it('`gatehouse users list` lists the service’s accounts instead of "in use by process …"', async () => {
    const r = await runGatehouse(['users', 'list'], { env: { DATA_DIR: dataDir }, cwd: dataDir });
    assert.equal(r.code, 0, `${r.err}|${r.out}`);
    assert.ok(r.out.includes(email), r.out);
    assert.doesNotMatch(r.err, /in use/);
  });

  it('`gatehouse users reset-link` names the service’s port, not the 3000 of the CLI’s own defaults', async () => {
    const r = await runGatehouseHere(['users', 'reset-link', email], {
      env: { DATA_DIR: dataDir },
      cwd: dataDir,
    });
    assert.equal(r.code, 0, `${r.err}|${r.out}`);
    const link = new URL(r.out.trim());
    assert.equal(link.origin, `http://localhost:${port}`);
    assert.equal(link.searchParams.get('type'), 'password-reset');
  });
});
