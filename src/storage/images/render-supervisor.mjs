/**
 * The supervisor of one lane's render processes (pool.ts starts one per lane). It forks render processes
 * when the service asks, tells the service each one's socket once it listens, kills one when the service
 * says so (a render past IMAGE_TIMEOUT, a broken connection), and tells the service when one has exited,
 * however it ended. The service hands jobs to the processes itself, over their sockets: no job and no
 * image byte passes through here, so a render does not wait for this process to be scheduled.
 *
 * It exists because forking costs the forking process time in proportion to its memory: the service,
 * with its heap, its database and its caches, stalled its event loop for 100–200 ms on every fork on a
 * busy machine. This process stays small, so its forks are cheap, and the service forks only once, to
 * start it. Plain JavaScript, so the same file runs from the sources and from dist/.
 *
 * Arguments: the render module and the lane's private socket folder. Messages from the service:
 * `{type: 'spawn'}` and `{type: 'kill', proc}`. To the service: `{kind: 'ready'}` once, then
 * `{kind: 'up', proc, socket, pid}` when a render process listens and `{kind: 'down', proc, reason}`
 * when it has exited (or never started).
 */
import { fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [body, dir] = process.argv.slice(2);
if (!body || !dir || !process.send)
  throw new Error('render-supervisor.mjs is started by the image render pool');
const host = fileURLToPath(new URL('./render-host.mjs', import.meta.url));

/** Longest a render process may take to load and say it is ready, in ms. */
const START_TIMEOUT_MS = 60_000;

/** @type {Map<number, import('node:child_process').ChildProcess>} */
const procs = new Map();
let seq = 0;

const send = (m) => process.send?.(m);

function spawnProc() {
  const n = ++seq;
  const socket = path.join(dir, `r${n}.sock`);
  const child = fork(host, [body, socket], {
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  procs.set(n, child);
  const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
  child.on('message', (m) => {
    if (m?.kind !== 'ready') return;
    clearTimeout(timer);
    send({ kind: 'up', proc: n, socket, pid: child.pid });
  });
  child.once('exit', (code, signal) => {
    clearTimeout(timer);
    procs.delete(n);
    rmSync(socket, { force: true });
    send({ kind: 'down', proc: n, reason: signal ?? `code ${code}` });
  });
  child.on('error', () => child.kill('SIGKILL'));
}

process.on('message', (m) => {
  if (m.type === 'spawn') spawnProc();
  else if (m.type === 'kill') procs.get(m.proc)?.kill('SIGKILL');
});

// The service went away: so do the render processes, and their sockets.
process.on('disconnect', () => {
  for (const child of procs.values()) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});

send({ kind: 'ready' });
