/**
 * Resumable uploads on the fs backend: tus-js-client sends 50 MB in 5 MB chunks to /storage/uploads,
 * against the plain multipart upload of the same file to /storage/o in the same run (rounds interleaved,
 * medians reported, as the other file scenarios do on this shared machine).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as tus from 'tus-js-client';
import { type BenchEnv, type Scenario, serviceDatabase } from '../lib/env.ts';
import { uploadMultipart } from '../lib/http.ts';
import { MB, type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';
import { BENCH_USER, benchToken, HS_ENV } from '../lib/tokens.ts';
import { median, writeRandomFile } from './storage.ts';

const SIZE = 50 * MB;
const CHUNK = 5 * MB;

function tusUpload(endpoint: string, data: Buffer, key: string, headers: Record<string, string>) {
  const started = process.hrtime.bigint();
  return new Promise<number>((resolve, reject) => {
    new tus.Upload(data, {
      endpoint,
      chunkSize: CHUNK,
      headers,
      metadata: { path: key, filetype: 'application/octet-stream' },
      retryDelays: [],
      onError: reject,
      onSuccess: () => resolve(Number(process.hrtime.bigint() - started) / 1e9),
    }).start();
  });
}

export const tusScenarios: Scenario = {
  name: 'tus',
  async run(env: BenchEnv): Promise<Row[]> {
    const work = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-tus-'));
    const database = await serviceDatabase(env);
    const svc = await startService({ ...database.vars, ...HS_ENV, STORAGE_MAX_UPLOAD_SIZE: '1GiB' });
    try {
      const auth = { authorization: `Bearer ${await benchToken()}` };
      const file = path.join(work, 'big.bin');
      await writeRandomFile(file, SIZE);
      const data = readFileSync(file);
      const rounds = env.quick ? 1 : 3;
      const plainS: number[] = [];
      const tusS: number[] = [];
      for (let round = 1; round <= rounds; round++) {
        env.log(`plain upload of ${SIZE / MB} MB (${round}/${rounds})`);
        const plain = await uploadMultipart(`${svc.url}/storage/o/user/${BENCH_USER}/plain.bin`, file, auth);
        if (plain.status !== 200) throw new Error(`plain upload answered ${plain.status}: ${plain.body}`);
        plainS.push(plain.seconds);
        env.log(`TUS upload of ${SIZE / MB} MB in ${CHUNK / MB} MB chunks (${round}/${rounds})`);
        tusS.push(await tusUpload(`${svc.url}/storage/uploads`, data, `user/${BENCH_USER}/tus.bin`, auth));
      }
      return [
        row(
          `TUS upload ${SIZE / MB} MB in ${CHUNK / MB} MB chunks (fs)`,
          'MB/s',
          SIZE / MB / median(tusS),
          SIZE / MB / median(plainS),
          { kind: 'min-ratio', value: 0.6 },
          {
            rounds,
            tusSeconds: tusS.map((x) => x.toFixed(2)).join('/'),
            plainSeconds: plainS.map((x) => x.toFixed(2)).join('/'),
          },
        ),
      ];
    } finally {
      await svc.stop();
      await database.drop();
      rmSync(work, { recursive: true, force: true });
    }
  },
};
