/**
 * Image transformation: a 2000×1500 JPEG to a 400-px-wide WebP through the service against the same sharp
 * pipeline called directly, and a cached variant against a plain download of a file of the same size.
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

export const imageScenarios: Scenario = {
  name: 'images',
  async run(env: BenchEnv): Promise<Row[]> {
    const rows: Row[] = [];
    const work = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-img-'));
    const database = await serviceDatabase(env);
    const svc = await startService({ ...database.vars, ...HS_ENV });
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
      env.log(`${n} transforms through the service, alternating with sharp directly`);
      let serviceS = 0;
      let directS = 0;
      for (let i = 0; i < n; i++) {
        const r = await download(`${svc.url}/storage/o/public/bench/photo.jpg?w=${400 + i}&f=webp`);
        if (r.status !== 200) throw new Error(`transform answered ${r.status}`);
        serviceS += r.seconds;
        const t = process.hrtime.bigint();
        await sharp(Buffer.from(jpeg))
          .rotate()
          .resize({ width: 400 + i })
          .webp({ quality: 80 })
          .toBuffer();
        directS += Number(process.hrtime.bigint() - t) / 1e9;
      }
      rows.push(
        row('transform 2000x1500 JPEG -> w=400 webp', 'ms', (serviceS / n) * 1000, (directS / n) * 1000, {
          kind: 'max-ratio',
          value: 1.2,
        }),
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
    } finally {
      await svc.stop();
      await database.drop();
      rmSync(work, { recursive: true, force: true });
    }
    return rows;
  },
};
