/**
 * Drives load from a separate process (bench/lib/load-worker.ts runs autocannon), so the load generator
 * never shares an event loop with what it measures.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface LoadSpec {
  url: string;
  connections: number;
  durationS: number;
  method?: 'GET' | 'POST' | 'HEAD';
  headers?: Record<string, string>;
  body?: string;
  /** Stop after this many requests instead of the duration. */
  amount?: number;
  /**
   * Refresh-token chains: each connection starts from its own token and follows the rotation
   * (`GET <url>?refresh_token=<token>`, the answer's `refresh_token` is used next).
   */
  refreshTokens?: string[];
  /**
   * One body per request, each used once, in order (single-use credentials: authorization codes); the
   * run ends when they are used up (with `amount` set to their number) or at the duration.
   */
  bodies?: string[];
  /** Requests per second cap per connection (for probes that must not add load). */
  rate?: number;
}

export interface LoadResult {
  requestsPerSec: number;
  throughputMBps: number;
  latencyP50: number;
  latencyP99: number;
  latencyMax: number;
  requests: number;
  errors: number;
  non2xx: number;
  durationS: number;
  /** Answers per HTTP status. */
  statusCodes: Record<string, number>;
  /** Refresh chains: status and body of the first answer that was not a 200. */
  firstFailure?: string;
}

const WORKER = fileURLToPath(new URL('./load-worker.ts', import.meta.url));

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`load worker exited with ${code}`));
      try {
        resolve(JSON.parse(out) as LoadResult);
      } catch (err) {
        reject(err);
      }
    });
    child.stdin.end(JSON.stringify(spec));
  });
}
