/**
 * What the long reliability runs (`npm run soak`, `npm run fuzz`) share: the service started from the
 * sources as its own process on 127.0.0.1 (as `npm start` runs it), a fresh PostgreSQL database for it
 * (dropped at the end), its resident memory sampled from /proc, and the figures they print.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
const TSX = import.meta.resolve('tsx');

export interface RunningService {
  url: string;
  pid: number;
  dataDir: string;
  /** Lines the service logged at error level or above (the first 50). */
  errors: string[];
  rssBytes(): number;
  /** SIGTERM, and the exit code (or signal) once it has stopped. */
  stop(): Promise<number | string>;
  exited: Promise<number | string>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** Starts `src/main.ts` with `env` (plus HOST, PORT, DATA_DIR) and waits until /health answers. */
export async function startService(
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<RunningService> {
  const port = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gatehouse-reliability-'));
  const child: ChildProcess = spawn(process.execPath, ['--import', TSX, 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'error',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const errors: string[] = [];
  const keep = (chunk: string) => {
    for (const line of chunk.split('\n'))
      if (line.trim() && errors.length < 50) errors.push(line.slice(0, 2000));
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`the service exited (${child.exitCode}) at start:\n${errors.join('\n')}`);
    try {
      if ((await fetch(`${url}/health`)).status === 204) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('the service did not answer /health in time');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const pid = child.pid as number;
  return {
    url,
    pid,
    dataDir,
    errors,
    rssBytes: () => rssOf(pid),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

export interface FreshDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A new database on the server of `adminUrl` (whose user may create databases), dropped by `drop`. */
export async function freshDatabase(adminUrl: string, prefix: string): Promise<FreshDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/** Resident memory sampled every `everyMs` while a run goes. */
export class RssSampler {
  readonly samples: { t: number; rss: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly pid: number,
    private readonly everyMs = 1000,
  ) {}
  start(): void {
    const t0 = Date.now();
    const take = () => {
      try {
        this.samples.push({ t: (Date.now() - t0) / 1000, rss: rssOf(this.pid) });
      } catch {
        // the process is gone; the run reports it
      }
    };
    take();
    this.timer = setInterval(take, this.everyMs);
  }
  stop(): void {
    clearInterval(this.timer);
  }
  /** First, peak and last sample (MB), and the least-squares slope of the second half (MB per minute). */
  summary(): { firstMb: number; peakMb: number; lastMb: number; secondHalfSlopeMbPerMin: number } {
    const mb = (b: number) => Math.round((b / 1024 / 1024) * 10) / 10;
    const s = this.samples;
    const half = s.slice(Math.floor(s.length / 2));
    let slope = 0;
    if (half.length >= 2) {
      const n = half.length;
      const mx = half.reduce((a, p) => a + p.t, 0) / n;
      const my = half.reduce((a, p) => a + p.rss, 0) / n;
      const num = half.reduce((a, p) => a + (p.t - mx) * (p.rss - my), 0);
      const den = half.reduce((a, p) => a + (p.t - mx) ** 2, 0);
      slope = den === 0 ? 0 : num / den;
    }
    return {
      firstMb: mb(s[0]?.rss ?? 0),
      peakMb: mb(Math.max(...s.map((p) => p.rss))),
      lastMb: mb(s[s.length - 1]?.rss ?? 0),
      secondHalfSlopeMbPerMin: Math.round((slope * 60 * 10) / 1024 / 1024) / 10,
    };
  }
}

/** The value at quantile q (0..1) of sorted numbers. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
}

/** The PostgreSQL URL the README's set-up gives (TEST_DATABASE_URL), or a message saying what to set. */
export function postgresUrl(): string | undefined {
  return process.env['TEST_DATABASE_URL'] || process.env['DATABASE_URL'] || undefined;
}
