/**
 * Transforms an anonymous caller can make expensive, bounded: a drawing that takes librsvg far longer
 * than IMAGE_TIMEOUT is stopped at the limit (its render process killed) while the service keeps
 * answering; the failure is remembered; raster enlargement is capped; SVG is drawn only when a setting
 * allows it, never with outside references; renders have their own per-client rate limit.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { TestApp } from '../helpers/app.ts';
import { type DbKind, dbKinds } from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';
import { buildStorageApp, hbpRules } from '../storage/helpers.ts';
import { flat, hostileSvg, photo, SMALL_SVG } from './fixtures.ts';

const IMAGE_TIMEOUT = 2;

async function upload(t: TestApp, key: string, data: Buffer, type: string): Promise<void> {
  const res = await t.app.inject({
    method: 'POST',
    url: `/storage/o/${key}`,
    payload: data,
    headers: { 'content-type': type },
  });
  assert.equal(res.statusCode, 200, res.body);
}

function images(t: TestApp) {
  const s = t.ctx.storage;
  if (!s) throw new Error('storage is off');
  return s.images;
}

/** Polls `url` every 20 ms until stopped; reports the slowest answer and how many there were. */
function poll(url: string): { stop(): Promise<{ slowestMs: number; count: number; failures: number }> } {
  let running = true;
  let slowestMs = 0;
  let count = 0;
  let failures = 0;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const res = await fetch(url);
      await res.arrayBuffer();
      slowestMs = Math.max(slowestMs, performance.now() - started);
      count++;
      if (res.status !== 204) failures++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { slowestMs, count, failures };
    },
  };
}

function svgEnabled(db: DbKind) {
  describe(`bounded transforms with SVG enabled [${db}]`, () => {
    let t: TestApp;
    let base: string;
    let peer: Server;
    let peerHits = 0;
    // Ten filter layers: about 10 s of drawing on this machine, far past IMAGE_TIMEOUT on a faster one too
    // (that sharp's own timeout does not stop such a drawing was checked once, not on every run: it tested
    // the library, for 10 s of CPU).
    const hostile = hostileSvg(10);

    before(async () => {
      t = await buildStorageApp(
        'fs',
        undefined,
        { ...hbpRules(), IMAGE_SVG_ENABLED: true, IMAGE_TIMEOUT, RATE_LIMIT_TRANSFORM_MAX: 1000 },
        db,
      );
      base = await t.app.listen({ port: 0, host: '127.0.0.1' });
      await upload(t, 'public/b/hostile.svg', hostile, 'image/svg+xml');
      await upload(t, 'public/b/small.svg', SMALL_SVG, 'image/svg+xml');
      await upload(t, 'public/b/photo.png', await photo(300, 200), 'image/png');
      await upload(t, 'public/b/dot.png', await flat(1, 1), 'image/png');
      // Starting a render process (loading sharp, and the sources through tsx in a checkout) takes
      // seconds on a loaded machine; the bound is on the render, so both lanes are started first.
      // A start slower than the pool's own limit (60 s, a badly overloaded machine) answers 503: ask again.
      for (const url of ['/storage/o/public/b/small.svg?w=8&f=png', '/storage/o/public/b/photo.png?w=8']) {
        let res = await fetch(`${base}${url}`);
        for (let i = 0; i < 3 && res.status === 503; i++) res = await fetch(`${base}${url}`);
        assert.equal(res.status, 200, await res.text());
      }
      peer = createServer((_req, res) => {
        peerHits++;
        res.end('x');
      });
      await new Promise<void>((r) => peer.listen(0, '127.0.0.1', r));
    });
    after(async () => {
      await t?.close();
      await new Promise((r) => peer?.close(r));
    });

    it('stops the hostile SVG at IMAGE_TIMEOUT with 422 within IMAGE_TIMEOUT + 1 s while /health answers under 100 ms throughout', async () => {
      const health = poll(`${base}/health`);
      const started = performance.now();
      const res = await fetch(`${base}/storage/o/public/b/hostile.svg?f=png`);
      const elapsed = performance.now() - started;
      const body = (await res.json()) as { code: string; message: string };
      const h = await health.stop();
      assert.equal(res.status, 422);
      assert.equal(body.code, 'IMAGE_TIMEOUT');
      assert.ok(elapsed < (IMAGE_TIMEOUT + 1) * 1000, `answered after ${Math.round(elapsed)} ms`);
      assert.ok(h.count >= 20, `/health was asked only ${h.count} times`);
      assert.equal(h.failures, 0);
      assert.ok(h.slowestMs < 100, `slowest /health took ${Math.round(h.slowestMs)} ms`);
      assert.equal(images(t).lanes.svg.pool.stats.timeouts, 1);
    });

    it('answers a repeat of the failed render at once with the same 422, rendering nothing', async () => {
      const { renders, failureHits } = images(t).stats;
      const started = performance.now();
      const res = await fetch(`${base}/storage/o/public/b/hostile.svg?f=png&cachebuster=1`);
      const elapsed = performance.now() - started;
      assert.equal(res.status, 422);
      assert.equal(((await res.json()) as { code: string }).code, 'IMAGE_TIMEOUT');
      assert.equal(images(t).stats.renders, renders);
      assert.equal(images(t).stats.failureHits, failureHits + 1);
      assert.ok(elapsed < 500, `took ${Math.round(elapsed)} ms`);
    });

    it('answers a small raster transform while the SVG lane is stuck on a hostile drawing', async () => {
      const hostileAnswer = fetch(`${base}/storage/o/public/b/hostile.svg?f=png&w=999`).then(() =>
        performance.now(),
      );
      await new Promise((r) => setTimeout(r, 200));
      const small = await fetch(`${base}/storage/o/public/b/photo.png?w=31&f=webp`);
      const smallAt = performance.now();
      assert.equal(small.status, 200);
      assert.ok(smallAt < (await hostileAnswer), 'the small transform waited for the hostile drawing');
    });

    it('answers the 1×1 → 8192×6100 upscale with the 1×1 image, not 50 megapixels', async () => {
      const res = await fetch(`${base}/storage/o/public/b/dot.png?w=8192&h=6100&f=png`);
      assert.equal(res.status, 200);
      const m = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
      assert.deepEqual([m.width, m.height], [1, 1]);
    });

    it('rasterises a plain SVG at the asked size', async () => {
      const res = await fetch(`${base}/storage/o/public/b/small.svg?w=80&f=png`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/png');
      const m = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
      assert.deepEqual([m.format, m.width, m.height], ['png', 80, 40]);
    });

    it('refuses an SVG that refers to a URL or a file, and fetches nothing', async () => {
      const port = (peer.address() as AddressInfo).port;
      for (const [name, href] of [
        ['url', `http://127.0.0.1:${port}/pixel.png`],
        ['file', 'file:///etc/hostname'],
      ]) {
        const svg = Buffer.from(
          `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="20" height="20"><image xlink:href="${href}" width="20" height="20"/><rect width="5" height="5" style="fill:url(${href})"/></svg>`,
        );
        await upload(t, `public/b/ref-${name}.svg`, svg, 'image/svg+xml');
        const res = await fetch(`${base}/storage/o/public/b/ref-${name}.svg?f=png`);
        assert.equal(res.status, 422);
        assert.equal(((await res.json()) as { code: string }).code, 'IMAGE_SVG_UNSAFE');
      }
      assert.equal(peerHits, 0);
    });

    it('draws SVG bytes stored under a raster type in the SVG lane too', async () => {
      await upload(t, 'public/b/disguised.png', SMALL_SVG, 'image/png');
      const res = await fetch(`${base}/storage/o/public/b/disguised.png?w=20&f=png`);
      assert.equal(res.status, 200);
      const m = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
      assert.deepEqual([m.width, m.height], [20, 10]);
    });
  });
}

function svgOff(db: DbKind) {
  describe(`transforms with SVG off (the default), enlargement allowed, and a render rate limit [${db}]`, () => {
    let t: TestApp;
    const get = (url: string, remoteAddress = '127.0.0.1') =>
      t.app.inject({ method: 'GET', url, remoteAddress });

    before(async () => {
      t = await buildStorageApp(
        'fs',
        undefined,
        {
          ...hbpRules(),
          IMAGE_ALLOW_ENLARGEMENT: true,
          RATE_LIMIT_TRANSFORM_MAX: 3,
          RATE_LIMIT_TRANSFORM_WINDOW: 60_000,
        },
        db,
      );
      await upload(t, 'public/o/logo.svg', SMALL_SVG, 'image/svg+xml');
      await upload(t, 'public/o/disguised.png', SMALL_SVG, 'image/png');
      await upload(t, 'public/o/dot.png', await flat(1, 1), 'image/png');
      await upload(t, 'public/o/photo.png', await photo(300, 200), 'image/png');
    });
    after(() => t?.close());

    it('answers a transform of a stored SVG with the stored file, as a download, without rendering', async () => {
      const renders = images(t).stats.renders;
      const res = await get('/storage/o/public/o/logo.svg?w=10&f=png');
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'image/svg+xml');
      assert.match(String(res.headers['content-disposition']), /^attachment;/);
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.match(String(res.headers['content-security-policy']), /sandbox/);
      assert.ok(res.rawPayload.equals(SMALL_SVG));
      assert.equal(images(t).stats.renders, renders);
    });

    it('refuses SVG bytes stored under a raster type with 415, never drawing them', async () => {
      const res = await get('/storage/o/public/o/disguised.png?w=10');
      assert.equal(res.statusCode, 415);
      assert.equal(res.json().code, 'NOT_AN_IMAGE');
      assert.equal(images(t).lanes.svg.pool.started, false, 'no SVG render process was started');
    });

    it('enlarges when IMAGE_ALLOW_ENLARGEMENT is on, but refuses a result over IMAGE_MAX_OUTPUT_PIXELS', async () => {
      const big = await get('/storage/o/public/o/dot.png?w=8192&h=6100&f=png', '10.9.0.1');
      assert.equal(big.statusCode, 422);
      assert.equal(big.json().code, 'IMAGE_TOO_LARGE');
      assert.match(big.json().message, /8192×6100/);
      const twice = await get('/storage/o/public/o/photo.png?w=600', '10.9.0.1');
      assert.equal(twice.statusCode, 200);
      const m = await sharp(twice.rawPayload).metadata();
      assert.deepEqual([m.width, m.height], [600, 400]);
    });

    it('limits renders per client with 429, while cached variants and other clients still get answers', async () => {
      const from = '10.7.0.1';
      for (const w of [11, 12, 13])
        assert.equal((await get(`/storage/o/public/o/photo.png?w=${w}`, from)).statusCode, 200);
      const over = await get('/storage/o/public/o/photo.png?w=14', from);
      assert.equal(over.statusCode, 429);
      assert.equal(over.json().code, 'RATE_LIMITED');
      assert.ok(Number(over.headers['retry-after']) > 0);
      // A variant already made costs no render and is not counted.
      assert.equal((await get('/storage/o/public/o/photo.png?w=12', from)).statusCode, 200);
      // A remembered failure neither: it is answered as before.
      const remembered = await get('/storage/o/public/o/dot.png?w=8192&h=6100&f=png', from);
      assert.equal(remembered.statusCode, 422);
      assert.equal((await get('/storage/o/public/o/photo.png?w=15', '10.7.0.2')).statusCode, 200);
      t.clock.advance(60_001);
      assert.equal((await get('/storage/o/public/o/photo.png?w=14', from)).statusCode, 200);
    });
  });
}

// Renders do not touch the database: one kind is enough (PostgreSQL when the run has it, as CI does).
// Running both doubled the hostile renders, each burning a core for IMAGE_TIMEOUT, for no added reach.
const db: DbKind = dbKinds().includes('postgres') ? 'postgres' : 'pglite';
svgEnabled(db);
svgOff(db);

if (runsHere('redis', 'render rate limit shared through Redis')) {
  describe('render rate limit shared through Redis', () => {
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      const settings = {
        ...hbpRules(),
        REDIS_URL: process.env['REDIS_URL'] as string,
        // The global per-address count is shared with every other run through Redis too.
        MAX_REQUESTS: 100_000,
        RATE_LIMIT_TRANSFORM_MAX: 2,
      };
      a = await buildStorageApp('fs', undefined, settings);
      b = await buildStorageApp('fs', undefined, settings);
      const png = await photo(60, 40);
      await upload(a, 'public/r/p.png', png, 'image/png');
      await upload(b, 'public/r/p.png', png, 'image/png');
    });
    after(async () => {
      await a?.close();
      await b?.close();
    });

    it('counts the renders of one client across instances', async () => {
      // Redis outlives a run and is shared with other runs: the address is new.
      const from = `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
      const tag = randomBytes(4).toString('hex');
      const get = (t: TestApp, w: number) =>
        t.app.inject({
          method: 'GET',
          url: `/storage/o/public/r/p.png?w=${w}&x=${tag}`,
          remoteAddress: from,
        });
      assert.equal((await get(a, 10)).statusCode, 200);
      assert.equal((await get(b, 11)).statusCode, 200);
      assert.equal((await get(a, 12)).statusCode, 429);
      assert.equal((await get(b, 13)).statusCode, 429);
    });
  });
}
