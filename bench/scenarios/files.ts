/**
 * The files table: the metadata of a folder of 10,000 files (`GET /storage/m/<folder>/`), read from
 * storage.files by one indexed prefix scan, against listing the same folder from the store directly
 * (what the route did before the table). The objects are written into the folder store before the
 * service starts, so the service's first start imports them (its time is reported too).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { FsObjectStore } from '../../src/storage/backends/fs.ts';
import { type BenchEnv, type Scenario, serviceDatabase } from '../lib/env.ts';
import { type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';
import { median } from './storage.ts';

const FOLDER = 'public/bench-list/';

export const filesScenarios: Scenario = {
  name: 'files',
  async run(env: BenchEnv): Promise<Row[]> {
    const count = env.quick ? 2000 : 10_000;
    const work = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-list-'));
    const dataDir = path.join(work, 'data');
    const store = new FsObjectStore(path.join(dataDir, 'storage'));
    await store.init();
    env.log(`writing ${count} objects into the folder store`);
    for (let i = 0; i < count; i++) {
      const name = `${FOLDER}f${String(i).padStart(5, '0')}.txt`;
      await store.put(name, Readable.from([Buffer.from(`file ${i}`)]), {
        contentType: 'text/plain',
        token: `t${i}`,
      });
    }
    const database = await serviceDatabase(env);
    const started = Date.now();
    const svc = await startService({ ...database.vars, DATA_DIR: dataDir });
    try {
      const url = `${svc.url}/storage/m/${FOLDER}`;
      // The first start imports the objects in the background; until then the folder is read from the store.
      for (;;) {
        const res = await fetch(`${svc.url}/storage/o/${FOLDER}f00000.txt`, { method: 'HEAD' });
        const imported = await fetch(url).then((r) => r.json() as Promise<unknown[]>);
        if (res.ok && imported.length === count) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const importS = (Date.now() - started) / 1000;
      const runs = env.quick ? 5 : 11;
      const tableMs: number[] = [];
      const storeMs: number[] = [];
      for (let i = 0; i < runs; i++) {
        env.log(`folder metadata of ${count} files (${i + 1}/${runs})`);
        let t = process.hrtime.bigint();
        const res = await fetch(url);
        const body = (await res.json()) as unknown[];
        tableMs.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (res.status !== 200 || body.length !== count)
          throw new Error(`listing answered ${res.status}, ${body.length} files`);
        t = process.hrtime.bigint();
        let listed = 0;
        for await (const _ of store.list(FOLDER)) listed++;
        storeMs.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (listed !== count) throw new Error(`the store listed ${listed}`);
      }
      return [
        row(
          `GET /storage/m/<folder>/ of ${count} files (table)`,
          'ms',
          median(tableMs),
          median(storeMs),
          { kind: 'max-value', value: 200 },
          { baseline: 'fs store listing in-process', startAndImportS: importS },
        ),
      ];
    } finally {
      await svc.stop();
      await database.drop();
      await store.close();
      rmSync(work, { recursive: true, force: true });
    }
  },
};
