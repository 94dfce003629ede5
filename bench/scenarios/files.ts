/**
 * The files table: the metadata of a folder of 10,000 files (`GET /storage/m/<folder>/`), read from
 * storage.files by indexed prefix scans, against listing the same folder from the store directly (what
 * the route did before the table). The objects are written into the folder store and imported into the
 * table (what `gatehouse storage reconcile` or a first start does; its time is reported) before the
 * service starts, so that every request is answered from the table: during a first start's background
 * import the service still lists the store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { systemClock } from '../../src/clock.ts';
import { configFrom } from '../../src/config.ts';
import { openPglite, openPostgres } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { FsObjectStore } from '../../src/storage/backends/fs.ts';
import { markStoreImported, reconcile } from '../../src/storage/files.ts';
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
    env.log(`importing ${count} objects into storage.files`);
    const dbUrl = database.vars['DATABASE_URL'];
    const db = dbUrl ? openPostgres(dbUrl, 2) : await openPglite(path.join(dataDir, 'db'));
    const started = process.hrtime.bigint();
    try {
      await migrate(db);
      const deps = { config: configFrom({ DATA_DIR: dataDir }), db, clock: systemClock, objects: store };
      const report = await reconcile(deps, { removeStale: false });
      await markStoreImported(deps, report.imported);
      if (report.imported !== count) throw new Error(`imported ${report.imported}`);
    } finally {
      await db.close();
    }
    const importS = Number(process.hrtime.bigint() - started) / 1e9;
    const svc = await startService({ ...database.vars, DATA_DIR: dataDir });
    try {
      const url = `${svc.url}/storage/m/${FOLDER}`;
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
          { baseline: 'fs store listing in-process', importS },
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
