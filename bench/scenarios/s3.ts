/** Download of a 50 MB file through the service on the s3 backend (s3rver) against a direct SDK GetObject. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { BenchEnv, Scenario } from '../lib/env.ts';
import { download, uploadMultipart } from '../lib/http.ts';
import { MB, type Row, row } from '../lib/report.ts';
import { freePort, startService } from '../lib/service.ts';
import { HS_ENV } from '../lib/tokens.ts';
import { median, writeRandomFile } from './storage.ts';

const BUCKET = 'gatehouse-bench';

export const s3Scenarios: Scenario = {
  name: 's3',
  async run(env: BenchEnv): Promise<Row[]> {
    const work = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-s3-'));
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('../lib/s3rver-child.ts', import.meta.url)),
        String(port),
        path.join(work, 's3'),
        BUCKET,
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    await new Promise<void>((resolve, reject) => {
      child.stdout.once('data', () => resolve());
      child.once('exit', (c) => reject(new Error(`s3rver exited with ${c}`)));
    });
    const svc = await startService({
      ...HS_ENV,
      S3_ENDPOINT: `127.0.0.1:${port}`,
      S3_SSL_ENABLED: 'false',
      S3_BUCKET: BUCKET,
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
    });
    try {
      const size = (env.quick ? 20 : 50) * MB;
      const file = path.join(work, 'big.bin');
      await writeRandomFile(file, size);
      const up = await uploadMultipart(`${svc.url}/storage/o/public/bench/big.bin`, file, {});
      if (up.status !== 200) throw new Error(`s3 upload answered ${up.status}: ${up.body}`);
      const client = new S3Client({
        endpoint: `http://127.0.0.1:${port}`,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
      // Service and direct runs interleaved, medians reported (see storage.ts).
      const runs = env.quick ? 2 : 4;
      const serviceS: number[] = [];
      const directS: number[] = [];
      for (let i = 0; i < runs; i++) {
        const d = await download(`${svc.url}/storage/o/public/bench/big.bin`);
        if (d.status !== 200 || d.bytes !== size)
          throw new Error(`s3 download answered ${d.status} with ${d.bytes} bytes`);
        serviceS.push(d.seconds);
        const t = process.hrtime.bigint();
        const obj = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'public/bench/big.bin' }));
        await pipeline(obj.Body as NodeJS.ReadableStream, new Writable({ write: (_c, _e, cb) => cb() }));
        directS.push(Number(process.hrtime.bigint() - t) / 1e9);
      }
      client.destroy();
      return [
        row(
          `download ${size / MB} MB (s3rver)`,
          'MB/s',
          size / MB / median(serviceS),
          size / MB / median(directS),
          { kind: 'min-ratio', value: 0.8 },
        ),
      ];
    } finally {
      await svc.stop();
      child.kill('SIGTERM');
      rmSync(work, { recursive: true, force: true });
    }
  },
};
