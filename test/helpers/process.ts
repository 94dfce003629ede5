/**
 * Runs Gatehouse (or a fixture built on src/server.ts) as a real child process, the way an operator does,
 * and reads its JSON log lines: the "listening" line gives the bound address.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** tsx's loader by absolute URL, so that a child may run in any working directory. */
const TSX = import.meta.resolve('tsx');

export interface ServiceProcess {
  child: ChildProcess;
  /** Every stdout line parsed as JSON (non-JSON lines are kept as `{ text }`). */
  logs: Record<string, unknown>[];
  stdout(): string;
  stderr(): string;
  /** Resolves with the listening address; rejects if the process exits first. */
  listening: Promise<string>;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  exited: Promise<number | string>;
}

/**
 * Starts `node --import tsx <script>` (or the plain `node <script>` for compiled JavaScript) with exactly
 * `env` plus PATH, so that the developer's environment cannot leak into a test.
 */
export function runNode(
  script: string,
  env: Record<string, string>,
  opts: { cwd?: string; args?: string[] } = {},
): ServiceProcess {
  // In the compiled test tree (scripts/test-build.mjs) a .ts script has its .js beside it: run that.
  const compiled = script.replace(/\.ts$/, '.js');
  if (compiled !== script && existsSync(path.resolve(opts.cwd ?? REPO_ROOT, compiled))) script = compiled;
  const nodeArgs = script.endsWith('.ts') ? ['--import', TSX, script] : [script];
  const child = spawn(process.execPath, [...nodeArgs, ...(opts.args ?? [])], {
    cwd: opts.cwd ?? REPO_ROOT,
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return watch(child);
}

/** Wraps a spawned child: collects output, finds the listening address, reports the exit. */
export function watch(child: ChildProcess): ServiceProcess {
  let out = '';
  let err = '';
  let pending = '';
  const logs: Record<string, unknown>[] = [];
  let onListening: (address: string) => void = () => {};
  const listening = new Promise<string>((resolve) => {
    onListening = resolve;
  });
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        entry = { text: line };
      }
      logs.push(entry);
      if (typeof entry['address'] === 'string' && String(entry['msg']).startsWith('Gatehouse listening')) {
        onListening(entry['address']);
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  const listeningOrExit = Promise.race([
    listening,
    exited.then((code) => {
      throw new Error(`process exited (${code}) before listening:\n${out}\n${err}`);
    }),
  ]);
  // A test that expects an early exit never awaits `listening`; its rejection is not an error then.
  listeningOrExit.catch(() => {});
  return { child, logs, stdout: () => out, stderr: () => err, listening: listeningOrExit, exited };
}

/** Kills a child that a failed test left running. */
export function killIfRunning(p: ServiceProcess | undefined): void {
  if (p && p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
}

/** Every process descending from `pid` (Linux /proc), children first. */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = parents.get(ppid) ?? [];
    list.push(Number(entry));
    parents.set(ppid, list);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of parents.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Whether a process with this pid still exists (and is not a zombie). */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
