/**
 * `npm run bench [-- --quick] [--db=pglite|postgres] [--only=name,name]`: builds the service, runs each
 * scenario against the built service in its own process, and prints service figures next to baselines
 * measured in the same run. Results also go to bench/results/<date>.json.
 */
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import type { BenchEnv, Scenario } from './lib/env.ts';
import { type Row, table } from './lib/report.ts';
import { authScenarios } from './scenarios/auth.ts';
import { filesScenarios } from './scenarios/files.ts';
import { imageScenarios } from './scenarios/images.ts';
import { refreshScenarios } from './scenarios/refresh.ts';
import { revokedListScenarios } from './scenarios/revoked-list.ts';
import { s3Scenarios } from './scenarios/s3.ts';
import { storageScenarios } from './scenarios/storage.ts';
import { tusScenarios } from './scenarios/tus.ts';

const SCENARIOS: Scenario[] = [
  authScenarios,
  refreshScenarios,
  revokedListScenarios,
  storageScenarios,
  filesScenarios,
  tusScenarios,
  s3Scenarios,
  imageScenarios,
];

const args = process.argv.slice(2);
const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = args.includes('--quick');
const only = flag('only')?.split(',');
const db = (flag('db') ?? 'pglite') as 'pglite' | 'postgres';
const pgUrl =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';

const env: BenchEnv = {
  quick,
  durationS: quick ? 3 : 10,
  pgUrl,
  db,
  log: (m) => process.stderr.write(`[bench] ${m}\n`),
};

env.log('building (npm run build)');
execSync('npm run build', { stdio: ['ignore', 'ignore', 'inherit'] });

const started = Date.now();
const rows: Row[] = [];
for (const s of SCENARIOS) {
  if (only && !only.includes(s.name)) continue;
  env.log(`scenario ${s.name}`);
  rows.push(...(await s.run(env)));
}

const machine = {
  cores: os.cpus().length,
  cpu: os.cpus()[0]?.model ?? 'unknown',
  memoryGB: Math.round(os.totalmem() / 1024 ** 3),
  node: process.version,
  platform: `${os.platform()} ${os.release()}`,
};
process.stdout.write(
  `\n${table(rows)}\n\nmachine: ${JSON.stringify(machine)}; database: ${db}; ${quick ? 'quick' : 'full'} run in ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
);
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
const file = new URL(`./results/${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url);
writeFileSync(
  file,
  `${JSON.stringify({ date: new Date().toISOString(), quick, db, machine, rows }, null, 2)}\n`,
);
process.stderr.write(`[bench] results written to ${file.pathname}\n`);
