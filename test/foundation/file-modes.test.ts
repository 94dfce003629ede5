/**
 * Nothing in DATA_DIR is readable by another local user. The real service process, started with umask
 * 000 on a fresh DATA_DIR, generates its keys and secrets, opens its embedded database, stores files,
 * renders an image variant and writes an email to the outbox; then no file or folder under DATA_DIR
 * grants group or others anything. A DATA_DIR that already holds 0644 files and 0755 folders is
 * tightened at start, with a warning.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { tightenDataDir } from '../../src/data-dir.ts';
import { buildTestApp, tempDir } from '../helpers/app.ts';
import { captureLog } from '../helpers/log.ts';
import { killIfRunning, REPO_ROOT, type ServiceProcess, watch } from '../helpers/process.ts';

const ADMIN = 'file-modes-admin-secret';
const TSX = import.meta.resolve('tsx');

/** Every file and folder under `root` (itself included), with its permission bits. */
function walk(root: string): { path: string; mode: number; dir: boolean }[] {
  const out = [{ path: '.', mode: statSync(root).mode & 0o777, dir: true }];
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, e.name);
      if (e.isSymbolicLink()) continue;
      out.push({ path: path.relative(root, file), mode: lstatSync(file).mode & 0o777, dir: e.isDirectory() });
      if (e.isDirectory()) stack.push(file);
    }
  }
  return out;
}

describe('DATA_DIR of a service started with umask 000', () => {
  const dataDir = tempDir('gatehouse-modes-');
  let svc: ServiceProcess | undefined;
  let base: string;

  before(async () => {
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '',
      DATA_DIR: dataDir,
      CUSTOM_DIR: path.join(dataDir, 'custom'),
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      AUTO_ACTIVATE_NEW_USERS: 'false',
      MFA_ENABLED: 'true',
      HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
      RATE_LIMIT_ENABLED: 'false',
      ARGON2_MEMORY_COST: '1024',
      ARGON2_TIME_COST: '1',
    };
    // The compiled test tree has src/main.js beside the source (scripts/test-build.mjs).
    const main = existsSync(path.join(REPO_ROOT, 'src/main.js'))
      ? 'src/main.js'
      : `--import "${TSX}" src/main.ts`;
    const child = spawn('sh', ['-c', `umask 000; exec "${process.execPath}" ${main}`], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    svc = watch(child);
    base = await svc.listening;
  });
  after(async () => {
    if (svc && svc.child.exitCode === null) {
      svc.child.kill('SIGTERM');
      await svc.exited;
    }
    killIfRunning(svc);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('was really started with umask 000 (a file its shell creates is 0666)', () => {
    const probe = spawn('sh', [
      '-c',
      `umask 000; : > "${path.join(dataDir, '..', path.basename(dataDir))}.probe"`,
    ]);
    return new Promise<void>((resolve) => {
      probe.on('exit', () => {
        const file = `${dataDir}.probe`;
        assert.equal(statSync(file).mode & 0o777, 0o666);
        rmSync(file);
        resolve();
      });
    });
  });

  it('registers, stores files, renders a variant and writes the outbox', async () => {
    const reg = await fetch(`${base}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'modes@example.com', password: 'modes-password-1' }),
    });
    assert.equal(reg.status, 200, await reg.text());
    const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const up = await fetch(`${base}/storage/o/public/modes/photo.png`, {
      method: 'POST',
      headers: { 'x-admin-secret': ADMIN, 'content-type': 'image/png' },
      body: png,
    });
    assert.equal(up.status, 200, await up.text());
    const variant = await fetch(`${base}/storage/o/public/modes/photo.png?w=16&f=webp`);
    assert.equal(variant.status, 200);
    await variant.arrayBuffer();
  });

  it('leaves no file or folder that group or others can read, write or enter', async () => {
    // The outbox and the variant cache are written after the answer: wait for them.
    for (let i = 0; i < 50 && !readdirSync(dataDir).includes('outbox'); i++)
      await new Promise((r) => setTimeout(r, 100));
    const entries = walk(dataDir);
    const top = new Set(readdirSync(dataDir));
    for (const folder of ['db', 'storage', 'keys', 'outbox'])
      assert.ok(top.has(folder), `DATA_DIR/${folder} exists (found ${[...top].join(', ')})`);
    const files = (under: string) => entries.filter((e) => !e.dir && e.path.startsWith(`${under}/`)).length;
    assert.ok(files('db') > 10, 'the database files were seen');
    assert.ok(files('storage') >= 2, 'the stored object and its metadata were seen');
    assert.ok(files('keys') >= 2, 'the generated keys and secrets were seen');
    assert.ok(files('outbox') >= 1, 'the outbox email was seen');
    const open = entries
      .filter((e) => (e.mode & 0o077) !== 0)
      .map((e) => `${e.path} ${e.mode.toString(8).padStart(4, '0')}`);
    assert.deepEqual(open, []);
    for (const e of entries) if (e.dir) assert.equal(e.mode, 0o700, e.path);
  });
});

describe('a DATA_DIR that others can already read', () => {
  it('is tightened at start (folders 0700, files 0600), with a warning', async () => {
    const dataDir = tempDir('gatehouse-loose-');
    try {
      chmodSync(dataDir, 0o755);
      mkdirSync(path.join(dataDir, 'keys'), { mode: 0o755 });
      chmodSync(path.join(dataDir, 'keys'), 0o755);
      writeFileSync(path.join(dataDir, 'keys', 'cookie-secret'), 'c'.repeat(48), { mode: 0o644 });
      chmodSync(path.join(dataDir, 'keys', 'cookie-secret'), 0o644);
      mkdirSync(path.join(dataDir, 'storage', 'objects', 'public'), { recursive: true, mode: 0o777 });
      chmodSync(path.join(dataDir, 'storage', 'objects', 'public'), 0o777);
      writeFileSync(path.join(dataDir, 'storage', 'objects', 'public', 'old.txt'), 'x');
      chmodSync(path.join(dataDir, 'storage', 'objects', 'public', 'old.txt'), 0o664);
      const capture = captureLog('info');
      const t = await buildTestApp('pglite', { DATA_DIR: dataDir }, { log: capture.log });
      await t.close();
      const open = walk(dataDir).filter((e) => (e.mode & 0o077) !== 0);
      assert.deepEqual(open, []);
      assert.equal(statSync(path.join(dataDir, 'keys')).mode & 0o777, 0o700);
      assert.equal(statSync(path.join(dataDir, 'keys', 'cookie-secret')).mode & 0o777, 0o600);
      const warned = capture.matching(/readable by other users/);
      assert.equal(warned.length, 1);
      assert.ok((warned[0]?.['tightened'] as number) >= 6, JSON.stringify(warned[0]));
      assert.equal(warned[0]?.['level'], 40);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('leaves the temporary folder alone if DATA_DIR names it by mistake', () => {
    const before = statSync(tmpdir()).mode & 0o7777;
    assert.deepEqual(tightenDataDir(tmpdir()), { changed: [], failed: [] });
    assert.equal(statSync(tmpdir()).mode & 0o7777, before);
  });
});
