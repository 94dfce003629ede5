/**
 * The direct channel between the service and its render processes (pool.ts, render-child.ts): jobs go
 * over each process's own Unix domain socket in a private folder, as raw bytes or as the path of an fs
 * data file. A process that dies under a job, a socket that is gone, a path that is no data file: each
 * is a 422 or a 503, never a 500 and never a hang, and the next job is served.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { AppError } from '../../src/errors.ts';
import type { RenderLimits } from '../../src/storage/images/pipeline.ts';
import { RenderPool, type RenderRequest } from '../../src/storage/images/pool.ts';
import { hostileSvg, photo } from './fixtures.ts';

const limits: RenderLimits = {
  maxPixels: 50_000_000,
  maxOutputPixels: 16_777_216,
  allowEnlargement: false,
  timeoutSeconds: 60,
  svg: 'render',
};

async function rejectsWith(p: Promise<unknown>, code: string, status: number): Promise<void> {
  const err = await p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`);
  assert.equal(err.code, code);
  assert.equal(err.statusCode, status);
}

describe('render processes over their own sockets', () => {
  const secret = `gatehouse-test-secret-${randomUUID()}`;
  let pool: RenderPool;
  let png: Buffer;
  const dataFile = path.join(tmpdir(), `photo~${randomUUID()}.data`);
  const job = (over: Partial<RenderRequest>): RenderRequest => ({
    params: { width: 50 },
    choice: 'png',
    limits,
    ...over,
  });

  before(async () => {
    // Set before the pool starts: the render processes must not see it.
    process.env.GATEHOUSE_TEST_SECRET = secret;
    png = await photo(300, 200);
    writeFileSync(dataFile, png);
    pool = new RenderPool({ niceness: 0, timeoutMs: 60_000, maxIdle: 1 });
  });
  after(async () => {
    delete process.env.GATEHOUSE_TEST_SECRET;
    rmSync(dataFile, { force: true });
    await pool.close();
  });

  it('renders raw bytes sent over the socket', async () => {
    const out = await pool.run(job({ input: png }));
    assert.ok(typeof out === 'object');
    assert.equal(out.width, 50);
    const meta = await sharp(out.data).metadata();
    assert.equal(meta.format, 'png');
    assert.equal(meta.width, 50);
  });

  it('keeps the sockets in a 0700 folder and gives the render process none of the service environment', async () => {
    await pool.run(job({ input: png }));
    const started = pool.lastStarted;
    assert.ok(started);
    assert.equal(statSync(path.dirname(started.socket)).mode & 0o777, 0o700);
    assert.ok(statSync(started.socket).isSocket());
    const environ = readFileSync(`/proc/${started.pid}/environ`, 'latin1');
    assert.ok(!environ.includes(secret), 'the secret reached the render process');
  });

  it('renders a data file the render process opens itself, with the same result as its bytes', async () => {
    const fromFile = await pool.run(job({ file: { path: dataFile, size: png.length } }));
    const fromBytes = await pool.run(job({ input: png }));
    assert.ok(typeof fromFile === 'object' && typeof fromBytes === 'object');
    assert.deepEqual(fromFile.data, fromBytes.data);
  });

  it('answers gone for a data file that was removed or is not the size its metadata gives', async () => {
    const missing = path.join(tmpdir(), `photo~${randomUUID()}.data`);
    assert.equal(await pool.run(job({ file: { path: missing, size: png.length } })), 'gone');
    assert.equal(await pool.run(job({ file: { path: dataFile, size: png.length + 1 } })), 'gone');
  });

  it('opens no file that is not a data file of the store (422, nothing of it sent back)', async () => {
    for (const p of ['/etc/passwd', 'relative~00000000-0000-0000-0000-000000000000.data'])
      await rejectsWith(pool.run(job({ file: { path: p, size: 10 } })), 'IMAGE_CORRUPT', 422);
    const out = await pool.run(job({ input: png }));
    assert.ok(typeof out === 'object', 'the process still serves the next job');
  });

  it('answers 422 IMAGE_CORRUPT when the render process dies under the job, then serves the next job', async () => {
    const crashes = pool.stats.crashes;
    const running = pool.run(job({ input: hostileSvg(10), params: { width: 1000 } }));
    const before = pool.lastStarted;
    // Wait until the job is in a process, then kill it as a crashing decoder would die.
    for (let i = 0; i < 200 && pool.lastStarted === before; i++) await new Promise((r) => setTimeout(r, 25));
    const started = pool.lastStarted;
    assert.ok(started && started !== before);
    process.kill(started.pid, 'SIGKILL');
    await rejectsWith(running, 'IMAGE_CORRUPT', 422);
    assert.equal(pool.stats.crashes, crashes + 1);
    const out = await pool.run(job({ input: png }));
    assert.ok(typeof out === 'object');
    assert.notEqual(pool.lastStarted?.pid, started.pid);
  });

  it('answers 503 when the render process socket is gone, ends that process and serves the next job', async () => {
    await pool.run(job({ input: png }));
    const idle = pool.lastStarted;
    assert.ok(idle);
    unlinkSync(idle.socket); // the idle process is the one the next job gets
    const t0 = performance.now();
    await rejectsWith(pool.run(job({ input: png })), 'IMAGE_RENDERER_UNAVAILABLE', 503);
    assert.ok(performance.now() - t0 < 10_000, 'the job did not hang');
    const out = await pool.run(job({ input: png }));
    assert.ok(typeof out === 'object');
    assert.notEqual(pool.lastStarted?.pid, idle.pid);
    // The process whose socket was gone has been ended.
    await new Promise((r) => setTimeout(r, 200));
    assert.throws(() => process.kill(idle.pid, 0));
  });
});
