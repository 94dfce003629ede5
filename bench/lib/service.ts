/**
 * Starts the built service (`dist/main.js`) in its own process on a free port with a temporary DATA_DIR,
 * and reads its memory from /proc (VmRSS now, VmHWM = peak since start).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HBP_RULES } from '../../src/storage/rules/rules.ts';

export interface Service {
  url: string;
  pid: number;
  dataDir: string;
  /** Resident memory now, in bytes. */
  rss(): number;
  /** Peak resident memory since the process started (or since resetPeak), in bytes. */
  peakRss(): number;
  /** Starts a new peak measurement (Linux `clear_refs` 5); false when the kernel refuses. */
  resetPeak(): boolean;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export function procMemory(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

export async function waitForHealth(url: string, child: ChildProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`service exited with code ${child.exitCode}`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.status === 204) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('service did not become healthy in time');
}

export async function startService(env: Record<string, string>, entry = 'dist/main.js'): Promise<Service> {
  const port = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gatehouse-bench-'));
  // HBP's rules (anyone writes under /public): the scenarios upload anonymously. The built-in rules
  // refuse that, and their cost is the same (both are evaluated per request).
  mkdirSync(path.join(dataDir, 'custom', 'storage-rules'), { recursive: true });
  writeFileSync(path.join(dataDir, 'custom', 'storage-rules', 'rules.yaml'), HBP_RULES);
  // BENCH_NODE_ARGS adds Node flags to the service, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it
  // under a scenario's load (docs/performance.md).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, entry], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: dataDir,
      CUSTOM_DIR: path.join(dataDir, 'custom'),
      LOG_LEVEL: 'warn',
      RATE_LIMIT_ENABLED: 'false',
      // Above the 50 MiB default: the large-file scenarios measure throughput, not the limit.
      STORAGE_MAX_UPLOAD_SIZE: '1GiB',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHealth(url, child);
  const pid = child.pid ?? 0;
  return {
    url,
    pid,
    dataDir,
    rss: () => procMemory(pid, 'VmRSS'),
    peakRss: () => procMemory(pid, 'VmHWM'),
    resetPeak: () => {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, '5');
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
