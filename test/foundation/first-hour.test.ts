/**
 * What a newcomer meets in the first hour (issue 26): the start log names the one URL to open (the same
 * origin as the links in emails, so a link followed from the console keeps its session), the console,
 * the API reference and the outbox; `GET /` leads to the console outside production.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configFrom } from '../../src/config.ts';
import { type RunningServer, startServer, stopServer } from '../../src/server.ts';
import { newEmail } from '../helpers/accounts.ts';
import { buildTestApp, tempDir } from '../helpers/app.ts';
import { captureLog } from '../helpers/log.ts';

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('a development start on the defaults', () => {
  const dataDir = tempDir();
  const captured = captureLog('info');
  let server: RunningServer;
  let port: number;
  before(async () => {
    port = await freePort();
    const config = configFrom({
      DATA_DIR: dataDir,
      CUSTOM_DIR: path.join(dataDir, 'custom'),
      PORT: port,
      ARGON2_MEMORY_COST: 1024,
      ARGON2_TIME_COST: 1,
      AUTO_ACTIVATE_NEW_USERS: false,
    });
    server = await startServer(config, { log: captured.log });
  });
  after(async () => {
    await stopServer(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const startLine = () => {
    const [line] = captured.matching(/^Gatehouse listening/);
    assert.ok(line, 'the start line is logged');
    return line;
  };

  it('logs one URL to open, the origin of the emailed links too (localhost, not 127.0.0.1)', async () => {
    const line = startLine();
    assert.equal(line['url'], `http://localhost:${port}`);
    assert.match(String(line['msg']), new RegExp(`^Gatehouse listening on http://localhost:${port} `));
    const email = newEmail('first-hour');
    const res = await fetch(`${server.address}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'a long enough password' }),
    });
    assert.equal(res.status, 200, await res.text());
    await server.ctx.tasks.idle();
    const outbox = path.join(dataDir, 'outbox');
    const entry = readdirSync(outbox).find((n) => n.endsWith('.json'));
    assert.ok(entry, 'the activation email is in the outbox');
    const { link } = JSON.parse(readFileSync(path.join(outbox, entry), 'utf8')) as { link: string };
    assert.equal(new URL(link).origin, line['url'], 'the link opens the origin the log names');
  });

  it('names the console, the API reference and the outbox folder in the start line', async () => {
    const line = startLine();
    const consoleUrl = `http://localhost:${port}/console/`;
    const apiReference = `http://localhost:${port}/docs`;
    const outbox = path.resolve(dataDir, 'outbox');
    assert.equal(line['console'], consoleUrl);
    assert.equal(line['apiReference'], apiReference);
    assert.equal(line['outbox'], outbox);
    assert.ok(String(line['msg']).includes(consoleUrl), 'the message names the console');
    assert.ok(String(line['msg']).includes(apiReference), 'the message names the API reference');
    assert.ok(String(line['msg']).includes(outbox), 'the message names the outbox');
    const page = await fetch(`${server.address}/docs`);
    assert.equal(page.status, 200, 'the API reference the log names is served');
    assert.match(await page.text(), /swagger-ui-bundle\.js/);
  });

  it('redirects GET / to the console', async () => {
    const res = await fetch(`${server.address}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/console/');
  });
});

describe('GET / where the console is not for everyone', () => {
  it('is a JSON 404 in production, even with the console turned on for the admin', async () => {
    const t = await buildTestApp('pglite', {
      JWT_ALGORITHM: 'HS256',
      JWT_KEY: 'test-secret-key-of-at-least-32-bytes-long',
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://unused@127.0.0.1:1/unused',
      COOKIE_SECRET: 'c'.repeat(32),
      MFA_ENCRYPTION_KEY: 'm'.repeat(32),
      EMAILS_ENABLED: false,
      CONSOLE_ENABLED: true,
      HASURA_GRAPHQL_ADMIN_SECRET: 'an-admin-secret-of-at-least-32-characters',
    });
    try {
      const res = await t.app.inject({ url: '/' });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'NOT_FOUND');
    } finally {
      await t.close();
    }
  });

  it('is a JSON 404 outside production when CONSOLE_ENABLED is false', async () => {
    const t = await buildTestApp('pglite', { CONSOLE_ENABLED: false });
    try {
      const res = await t.app.inject({ url: '/' });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'NOT_FOUND');
    } finally {
      await t.close();
    }
  });
});
