/**
 * Checks the compiled service: starts `node dist/main.js` on embedded defaults in a temporary DATA_DIR,
 * expects GET /health to answer 204 and SIGTERM to exit 0, and the compiled CLI to list its commands.
 * `.ci/run` runs it after `npm run build`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from '../test/helpers/app.ts';
import { killIfRunning, REPO_ROOT, runNode } from '../test/helpers/process.ts';

const entry = path.join(REPO_ROOT, 'dist/main.js');
if (!existsSync(entry)) {
  process.stderr.write('dist/main.js is missing: run npm run build first\n');
  process.exit(1);
}
const dataDir = tempDir('gatehouse-smoke-');
const service = runNode(entry, { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' });
try {
  const address = await service.listening;
  const res = await fetch(`${address}/health`);
  if (res.status !== 204) throw new Error(`GET /health answered ${res.status}`);
  const ready = await fetch(`${address}/health/ready`);
  if (ready.status !== 204) throw new Error(`GET /health/ready answered ${ready.status}`);
  service.child.kill('SIGTERM');
  const code = await service.exited;
  if (code !== 0) throw new Error(`exit code ${code} after SIGTERM`);
  // The container image has dist/ only: the compiled command line must find its commands there.
  const cli = spawnSync(process.execPath, [path.join(REPO_ROOT, 'dist/cli/main.js'), '--help'], {
    encoding: 'utf8',
  });
  if (cli.status !== 0 || !/\n {2}keys /.test(cli.stdout))
    throw new Error(`node dist/cli/main.js --help failed (${cli.status}): ${cli.stderr}`);
  process.stdout.write(`dist smoke test passed (${address}, exit 0; dist/cli lists its commands)\n`);
} catch (err) {
  process.stderr.write(`dist smoke test failed: ${(err as Error).message}\n${service.stderr()}\n`);
  process.exitCode = 1;
} finally {
  killIfRunning(service);
  rmSync(dataDir, { recursive: true, force: true });
}
