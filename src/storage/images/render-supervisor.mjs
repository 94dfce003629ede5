/**
 * The supervisor of one lane's render processes (pool.ts starts one per lane). It forks the render
 * processes, hands each job to an idle one, relays the answers, and kills a process when the service
 * cancels its job (IMAGE_TIMEOUT), starting a spare in its place.
 *
 * It exists because forking costs the forking process time in proportion to its memory: the service,
 * with its heap, its database and its caches, stalled its event loop for 100–200 ms on every fork on a
 * busy machine. This process stays small, so its forks are cheap, and the service forks only once, to
 * start it. Plain JavaScript, so the same file runs from the sources and from dist/.
 *
 * Messages from the service: `{type: 'job', id, job}` and `{type: 'cancel', id}`. To the service:
 * `{kind: 'ready'}` once, `{id, kind: 'started'}` when a job reaches a render process (its time starts),
 * the render process's answer, and `{id, kind: 'crashed', reason}` when a process died under a job.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const body = process.argv[2];
if (!body || !process.send) throw new Error('render-supervisor.mjs is started by the image render pool');
const host = fileURLToPath(new URL('./render-host.mjs', import.meta.url));

/** Longest a render process may take to load and say it is ready, in ms. */
const START_TIMEOUT_MS = 60_000;

/** @typedef {{ child: import('node:child_process').ChildProcess, ready: Promise<boolean>, job: number | undefined, alive: boolean }} Proc */

/** @type {Proc[]} */
const idle = [];
/** @type {Map<number, Proc>} */
const running = new Map();

const send = (m) => process.send?.(m);

/** @returns {Proc} */
function spawnProc() {
  const child = fork(host, [body], {
    execArgv: [],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  /** @type {Proc} */
  const proc = { child, ready: Promise.resolve(false), job: undefined, alive: true };
  proc.ready = new Promise((resolve) => {
    const timer = setTimeout(() => {
      resolve(false);
      kill(proc);
    }, START_TIMEOUT_MS);
    child.on('message', (answer) => {
      if (answer.kind === 'ready') {
        clearTimeout(timer);
        resolve(true);
        return;
      }
      if (proc.job !== answer.id) return;
      running.delete(answer.id);
      proc.job = undefined;
      idle.push(proc);
      send(answer);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(false);
      proc.alive = false;
      const at = idle.indexOf(proc);
      if (at >= 0) idle.splice(at, 1);
      if (proc.job !== undefined && running.get(proc.job) === proc) {
        running.delete(proc.job);
        send({ id: proc.job, kind: 'crashed', reason: signal ?? `code ${code}` });
      }
    });
    child.on('error', () => kill(proc));
  });
  return proc;
}

/** @param {Proc} proc */
function kill(proc) {
  if (proc.alive) proc.child.kill('SIGKILL');
  proc.alive = false;
}

/** A spare, started ahead of need, so that a job after a cancelled one does not wait for a start. */
function spare() {
  if (idle.length === 0) idle.push(spawnProc());
}

async function run(id, job) {
  let proc = idle.pop();
  if (!proc?.alive) proc = spawnProc();
  proc.job = id;
  running.set(id, proc);
  const ok = await proc.ready;
  if (running.get(id) !== proc) return; // cancelled while it started
  if (!ok || !proc.alive) {
    running.delete(id);
    send({ id, kind: 'unavailable' });
    return;
  }
  send({ id, kind: 'started' });
  proc.child.send(job, (err) => {
    if (err && running.get(id) === proc) {
      running.delete(id);
      kill(proc);
      send({ id, kind: 'unavailable' });
    }
  });
}

process.on('message', (m) => {
  if (m.type === 'job') {
    void run(m.id, m.job);
  } else if (m.type === 'cancel') {
    const proc = running.get(m.id);
    running.delete(m.id);
    if (proc) {
      proc.job = undefined;
      kill(proc);
    }
    spare();
  }
});

// The service went away: so do the render processes.
process.on('disconnect', () => {
  for (const p of [...idle, ...running.values()]) kill(p);
  process.exit(0);
});

spare();
send({ kind: 'ready' });
