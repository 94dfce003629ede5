/**
 * Image transformation: a 2000×1500 JPEG to a 400-px-wide WebP through the service against the same sharp
 * pipeline called directly, a cached variant against a plain download of a file of the same size, and a
 * small transform's p99 while four hostile SVG drawings are asked for without pause, against its p99
 * alone.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { type BenchEnv, type Scenario, serviceDatabase } from '../lib/env.ts';
import { download, uploadMultipart } from '../lib/http.ts';
import { runLoad } from '../lib/load.ts';
import { type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';
import { HS_ENV } from '../lib/tokens.ts';

/** A photo-like test image: smooth gradients plus noise, so encoders do real work. */
async function makeJpeg(): Promise<Buffer> {
  const w = 2000;
  const h = 1500;
  const raw = Buffer.alloc(w * h * 3);
  const noise = randomBytes(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 3;
      const n = (noise[y * w + x] ?? 0) % 32;
      raw[i] = ((x * 255) / w + n) & 255;
      raw[i + 1] = ((y * 255) / h + n) & 255;
      raw[i + 2] = (((x + y) * 127) / (w + h) + n) & 255;
    }
  }
  return sharp(raw, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality: 85 })
    .toBuffer();
}

/** A ~1 KB SVG that librsvg takes seconds to draw at its own size (stacked turbulence and blur filters). */
function hostileSvg(): Buffer {
  let filters = '';
  for (let i = 0; i < 4; i++)
    filters += `<feTurbulence baseFrequency="0.9" numOctaves="10" seed="${i}" result="t${i}"/><feGaussianBlur in="t${i}" stdDeviation="50"/>`;
  return Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="1000" viewBox="0 0 1000 1000">' +
      `<filter id="f" x="0" y="0" width="1" height="1">${filters}</filter>` +
      '<rect width="1000" height="1000" filter="url(#f)"/></svg>',
  );
}

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length * 0.99) - 1)] ?? Number.NaN;
}

/** IMAGE_TIMEOUT of the hostile-drawings row: kills happen several times within a phase. */
const HOSTILE_TIMEOUT_S = 5;

export const imageScenarios: Scenario = {
  name: 'images',
  async run(env: BenchEnv): Promise<Row[]> {
    const rows: Row[] = [];
    const work = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-img-'));
    const database = await serviceDatabase(env);
    // SVG on and a short IMAGE_TIMEOUT, for the hostile-drawings row; the other rows use JPEG only.
    const svc = await startService({
      ...database.vars,
      ...HS_ENV,
      IMAGE_SVG_ENABLED: 'true',
      IMAGE_TIMEOUT: String(HOSTILE_TIMEOUT_S),
    });
    try {
      const jpeg = await makeJpeg();
      const src = path.join(work, 'photo.jpg');
      writeFileSync(src, jpeg);
      const up = await uploadMultipart(`${svc.url}/storage/o/public/bench/photo.jpg`, src, {}, 'image/jpeg');
      if (up.status !== 200) throw new Error(`image upload answered ${up.status}: ${up.body}`);

      // Distinct widths so every request renders (no cache hit). Service and direct calls alternate, so
      // load changes on a shared machine fall on both sides; the direct call gets a fresh copy of the
      // bytes each time, as the service reads fresh bytes from the store.
      const n = env.quick ? 8 : 24;
      // One render first, not counted: the render processes start on first use (about half a second, a
      // one-off at start documented in docs/images.md), as does sharp in both this process and the service.
      const warm = await download(`${svc.url}/storage/o/public/bench/photo.jpg?w=399&f=webp`);
      if (warm.status !== 200) throw new Error(`transform answered ${warm.status}`);
      await sharp(Buffer.from(jpeg)).rotate().resize({ width: 399 }).webp({ quality: 80 }).toBuffer();
      env.log(`${n} transforms through the service, alternating with sharp directly`);
      const serviceMs: number[] = [];
      const directMs: number[] = [];
      for (let i = 0; i < n; i++) {
        const r = await download(`${svc.url}/storage/o/public/bench/photo.jpg?w=${400 + i}&f=webp`);
        if (r.status !== 200) throw new Error(`transform answered ${r.status}`);
        serviceMs.push(r.seconds * 1000);
        const t = process.hrtime.bigint();
        await sharp(Buffer.from(jpeg))
          .rotate()
          .resize({ width: 400 + i })
          .webp({ quality: 80 })
          .toBuffer();
        directMs.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      const mean = (ms: number[]) => ms.reduce((a, b) => a + b, 0) / ms.length;
      const median = (ms: number[]) => [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)] ?? Number.NaN;
      rows.push(
        row(
          'transform 2000x1500 JPEG -> w=400 webp',
          'ms',
          mean(serviceMs),
          mean(directMs),
          { kind: 'max-ratio', value: 1.2 },
          { medianMs: median(serviceMs), sharpMedianMs: median(directMs) },
        ),
      );

      env.log('cached variant against a plain download of the same size');
      const variantUrl = `${svc.url}/storage/o/public/bench/photo.jpg?w=400&f=webp`;
      const first = await download(variantUrl);
      const same = path.join(work, 'same-size.bin');
      writeFileSync(same, randomBytes(first.bytes));
      const up2 = await uploadMultipart(
        `${svc.url}/storage/o/public/bench/same-size.bin`,
        same,
        {},
        'application/octet-stream',
      );
      if (up2.status !== 200) throw new Error(`upload answered ${up2.status}`);
      const cached = await runLoad({ url: variantUrl, connections: 8, durationS: env.durationS });
      const plain = await runLoad({
        url: `${svc.url}/storage/o/public/bench/same-size.bin`,
        connections: 8,
        durationS: env.durationS,
      });
      if (cached.non2xx > 0 || plain.non2xx > 0) throw new Error('cached/plain load had non-2xx answers');
      rows.push(
        row(
          `cached variant (${first.bytes} B)`,
          'req/s',
          cached.requestsPerSec,
          plain.requestsPerSec,
          { kind: 'min-ratio', value: 0.8 },
          {
            p99ms: cached.latencyP99,
            plainP99ms: plain.latencyP99,
          },
        ),
      );

      rows.push(await hostileRow(env, svc.url, jpeg, work));
    } finally {
      await svc.stop();
      await database.drop();
      rmSync(work, { recursive: true, force: true });
    }
    return rows;
  },
};

/**
 * A small transform (640×480 JPEG → a new width each time, WebP) one after another, alone, then while
 * four clients keep asking for hostile SVG drawings (each time with new parameters, so no answer comes
 * from the memory of failures): p99 against p99.
 */
async function hostileRow(env: BenchEnv, url: string, jpeg: Buffer, work: string): Promise<Row> {
  const small = await sharp(jpeg).resize(640, 480).jpeg({ quality: 85 }).toBuffer();
  const smallPath = path.join(work, 'small.jpg');
  writeFileSync(smallPath, small);
  const svgPath = path.join(work, 'hostile.svg');
  writeFileSync(svgPath, hostileSvg());
  for (const [file, key, type] of [
    [smallPath, 'small.jpg', 'image/jpeg'],
    [svgPath, 'hostile.svg', 'image/svg+xml'],
  ] as const) {
    const up = await uploadMultipart(`${url}/storage/o/public/bench/${key}`, file, {}, type);
    if (up.status !== 200) throw new Error(`upload of ${key} answered ${up.status}: ${up.body}`);
  }
  const n = env.quick ? 40 : 150;
  // Widths interleave between the phases so both do the same work; none repeats, so nothing is cached.
  const smallRun = async (phase: 0 | 1): Promise<number[]> => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = await download(`${url}/storage/o/public/bench/small.jpg?w=${100 + 2 * i + phase}&f=webp`);
      if (r.status !== 200) throw new Error(`small transform answered ${r.status}`);
      ms.push(r.seconds * 1000);
    }
    return ms;
  };
  // Warm both lanes (the render processes start on first use).
  await download(`${url}/storage/o/public/bench/small.jpg?w=99&f=webp`);
  await download(`${url}/storage/o/public/bench/hostile.svg?w=10&f=png`);

  env.log(`${n} small transforms alone`);
  const alone = await smallRun(0);

  env.log(
    `${n} small transforms while 4 clients ask for hostile SVG drawings (IMAGE_TIMEOUT=${HOSTILE_TIMEOUT_S})`,
  );
  let attacking = true;
  let hostileAnswers = 0;
  const statuses = new Map<number, number>();
  let variant = 0;
  const attackers = Array.from({ length: 4 }, async () => {
    while (attacking) {
      const r = await download(
        `${url}/storage/o/public/bench/hostile.svg?f=png&q=${(variant++ % 100) + 1}&r=${variant}`,
      );
      hostileAnswers++;
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  });
  await new Promise((r) => setTimeout(r, 1000)); // the drawings are under way
  const underAttack = await smallRun(1);
  attacking = false;
  await Promise.all(attackers);

  const base = p99(alone);
  const loaded = p99(underAttack);
  return row(
    'small transform p99 with 4 hostile SVG renders',
    'ms',
    loaded,
    base,
    { kind: 'max-ratio', value: 3 },
    {
      aloneMedianMs: [...alone].sort((a, b) => a - b)[Math.floor(n / 2)] ?? Number.NaN,
      hostileAnswers,
      hostileStatuses: [...statuses].map(([s, c]) => `${s}x${c}`).join(','),
    },
  );
}
