/**
 * Render processes: every image transform runs in a child process (render-child.ts), one job at a time
 * per process, and a job that outlives its time limit is ended by killing its process, which is
 * replaced at once. The processes are forked by a small supervisor (render-supervisor.mjs), never by the
 * service itself, whose forks stall its event loop. A thread would not do: libvips runs on libuv's thread pool, which a
 * terminated worker thread leaves running, and sharp's own `timeout` is only checked between chunks of
 * work, so one long step (librsvg drawing a filter, for one) runs on for as long as it takes.
 *
 * The processes run at a lower CPU priority than the service (`niceness`), so that requests, `/health`
 * among them, keep their latency while renders are busy; how many run at once is the caller's queue's
 * business (service.ts). Idle processes are kept for the next job but hold the service's event loop open
 * only while jobs are out; they exit when the service's end of the channel closes.
 *
 * The supervisor only assigns jobs to processes: the job itself goes straight from the service to its
 * render process over that process's Unix domain socket (in a 0700 folder of the OS temp dir made here),
 * as a small binary frame (render-wire.ts) followed by the source's raw bytes, or naming the fs store's
 * data file for the process to open read-only; the answer comes back the same way. Relaying the bytes
 * through the supervisor as structured-clone IPC messages cost two extra copies, two pipe hops and
 * a wake-up of a third process per render (docs/performance.md).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { getPriority, setPriority, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger } from 'fastify';
import { AppError } from '../../errors.ts';
import type { FormatChoice, ImageParams } from './params.ts';
import type { RenderLimits, RenderResult } from './pipeline.ts';
import { type AnswerHeader, FrameReader, frame, type JobHeader } from './render-wire.ts';

/** A job for a render process: the source's bytes, or the fs store's data file that holds them. */
export interface RenderRequest {
  input?: Uint8Array | undefined;
  /** A data file of the fs store (a path it made, never one from a request) and its size. */
  file?: { path: string; size: number } | undefined;
  params: ImageParams;
  choice: FormatChoice;
  limits: RenderLimits;
}

/**
 * A finished render; `reroute` when the input is not a raster image and belongs to the SVG lane; `gone`
 * when the job named a data file that is no longer there (the caller sends the bytes instead).
 */
export type RenderOutcome = RenderResult | 'reroute' | 'gone';

export interface PoolOptions {
  /** Added to the service's own nice value for these processes (at most 19 in all). */
  niceness: number;
  /** Longest a render may take, in milliseconds, from the job reaching its process. */
  timeoutMs: number;
  /** Idle render processes kept for the next jobs (the lane's concurrency); more are ended. */
  maxIdle?: number | undefined;
  log?: FastifyBaseLogger | undefined;
}

/** Longest a job may wait for its render process to start (a fresh one loads sharp first). */
const START_TIMEOUT_MS = 60_000;
/** Largest answer read from a render process (a result is at most IMAGE_MAX_OUTPUT_PIXELS). */
const MAX_ANSWER = 2 ** 31 - 1;

const SOURCES = import.meta.url.endsWith('.ts');
const SUPERVISOR = fileURLToPath(new URL('./render-supervisor.mjs', import.meta.url));
const BODY = new URL(`./render-child.${SOURCES ? 'ts' : 'js'}`, import.meta.url).href;

/**
 * The environment of the render processes: enough to run Node and libvips, and none of the service's
 * settings (secrets among them), which a process that parses untrusted files has no use for.
 */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(PATH|HOME|TMPDIR|TMP|TEMP|LANG|LC_ALL|TZ|NODE_ENV|VIPS_\w+|UV_THREADPOOL_SIZE)$/.test(k))
      env[k] = v;
  }
  return env;
}

function unavailable(cause?: unknown): AppError {
  return new AppError('IMAGE_RENDERER_UNAVAILABLE', undefined, { headers: { 'retry-after': '5' }, cause });
}

/** Messages of the supervisor (render-supervisor.mjs). */
type SupervisorMessage =
  | { kind: 'ready' }
  | { kind: 'up'; proc: number; socket: string; pid: number }
  | { kind: 'down'; proc: number; reason: string };

/**
 * How long a job whose connection broke before its answer waits to hear that its process died
 * (IMAGE_CORRUPT); past it, the process is ended and the job answers 503.
 */
const VERDICT_GRACE_MS = 2_000;

/** A render process that listens, and the job it has (at most one). */
interface Proc {
  n: number;
  socket: string;
  pid: number;
  job: Job | undefined;
}

interface Job {
  /** A process for it: given when one is free, or an Error when none could be started. */
  take(proc: Proc | Error): void;
  /** Its process exited (or the supervisor did) while it had the job. */
  died(reason: string | Error): void;
}

/** The supervisor process of a pool, started once (forking the service is what costs). */
class Supervisor {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  /** The lane's sockets: made by mkdtemp, so 0700, reachable only by the service's user. */
  readonly dir = mkdtempSync(path.join(tmpdir(), 'gatehouse-render-'));
  alive = true;

  constructor(niceness: number, onMessage: (m: SupervisorMessage) => void, onExit: (err: Error) => void) {
    this.child = fork(SUPERVISOR, [BODY, this.dir], {
      execArgv: [],
      env: childEnv(),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    try {
      // The render processes inherit it.
      if (this.child.pid !== undefined) setPriority(this.child.pid, Math.min(19, getPriority() + niceness));
    } catch {
      // Not allowed here (a restricted container): the processes run at the service's priority.
    }
    this.ready = new Promise<void>((resolve, reject) => {
      this.child.on('message', (m: SupervisorMessage) => {
        if (m.kind === 'ready') resolve();
        else onMessage(m);
      });
      this.child.once('exit', (code, signal) => {
        this.alive = false;
        rmSync(this.dir, { recursive: true, force: true });
        const err = new Error(`the image render supervisor exited (${signal ?? `code ${code}`})`);
        reject(err);
        onExit(err);
      });
      this.child.on('error', () => this.kill());
    });
    this.ready.catch(() => {});
  }

  /** Keeps the service's event loop open while jobs are out; lets it close otherwise. */
  hold(busy: boolean): void {
    if (!this.alive) return;
    if (busy) {
      this.child.ref();
      this.child.channel?.ref();
    } else {
      this.child.unref();
      this.child.channel?.unref();
    }
  }

  tell(m: { type: 'spawn' } | { type: 'kill'; proc: number }): void {
    if (this.alive) this.child.send(m, () => {});
  }

  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
    this.alive = false;
  }
}

/**
 * The render processes of one lane, behind their supervisor; `run` hands a job to a free process over
 * its socket and bounds the time its render takes.
 */
export class RenderPool {
  private supervisor: Supervisor | undefined;
  /** Processes that listen: free ones in `idle`, busy ones hold their job. */
  private readonly procs = new Map<number, Proc>();
  private readonly idle: Proc[] = [];
  /** Processes asked for that have not said they listen yet. */
  private starting = 0;
  /** Jobs waiting for a process, first come first served. */
  private readonly waiting: Job[] = [];
  private jobs = 0;
  private closed = false;
  /** Renders ended by the time limit, and render processes that died under a job. */
  readonly stats = { timeouts: 0, crashes: 0 };
  /** The process and socket of the last job handed over (tests, operators). */
  lastStarted: { pid: number; socket: string } | undefined;

  constructor(private readonly opts: PoolOptions) {}

  /** Whether this lane's processes were ever started. */
  get started(): boolean {
    return this.supervisor !== undefined;
  }

  private start(): Supervisor {
    if (this.supervisor?.alive) return this.supervisor;
    this.procs.clear();
    this.idle.length = 0;
    this.starting = 0;
    const sup = new Supervisor(
      this.opts.niceness,
      (m) => {
        if (this.supervisor === sup) this.onMessage(sup, m);
      },
      (err) => {
        if (this.supervisor !== sup) return;
        if (!this.closed)
          this.opts.log?.error(
            { err },
            'the image render supervisor stopped; it is restarted on the next job',
          );
        for (const p of this.procs.values()) p.job?.died(err);
        this.procs.clear();
        this.idle.length = 0;
        for (const job of this.waiting.splice(0)) job.take(err);
      },
    );
    this.supervisor = sup;
    // A first process at once: the first job then waits for its start only, not for this one's as well.
    this.spare(sup, true);
    return sup;
  }

  private onMessage(sup: Supervisor, m: SupervisorMessage): void {
    if (m.kind === 'up') {
      this.starting = Math.max(0, this.starting - 1);
      const proc: Proc = { n: m.proc, socket: m.socket, pid: m.pid, job: undefined };
      this.procs.set(proc.n, proc);
      this.release(sup, proc);
    } else if (m.kind === 'down') {
      const proc = this.procs.get(m.proc);
      if (!proc) {
        // It never listened: a job waiting for it gets no process.
        this.starting = Math.max(0, this.starting - 1);
        this.waiting.shift()?.take(new Error(`a render process did not start (${m.reason})`));
        return;
      }
      this.procs.delete(proc.n);
      const at = this.idle.indexOf(proc);
      if (at >= 0) this.idle.splice(at, 1);
      proc.job?.died(m.reason);
    }
  }

  /** A process free again: to the next waiting job, else kept (up to maxIdle), else ended. */
  private release(sup: Supervisor, proc: Proc): void {
    proc.job = undefined;
    const next = this.waiting.shift();
    if (next) next.take(proc);
    else if (this.idle.length < (this.opts.maxIdle ?? 1)) this.idle.push(proc);
    else this.end(sup, proc);
  }

  /** Kills a process (its job has ended some other way); its exit is reported as `down`. */
  private end(sup: Supervisor, proc: Proc): void {
    proc.job = undefined;
    sup.tell({ type: 'kill', proc: proc.n });
  }

  /**
   * Asks for processes so that every waiting job has one on its way, and (`ahead`) one more when none is
   * free, so that the job after a killed one does not wait for a start.
   */
  private spare(sup: Supervisor, ahead = false): void {
    const want = this.waiting.length + (ahead && this.idle.length === 0 ? 1 : 0);
    while (this.starting < want) {
      this.starting++;
      sup.tell({ type: 'spawn' });
    }
  }

  /**
   * Renders in a process of the pool. Throws the render's AppError (415/422), IMAGE_TIMEOUT (422) when
   * it ran out of time (its process is killed), IMAGE_CORRUPT (422) when its process died under it, or
   * IMAGE_RENDERER_UNAVAILABLE (503) when no process could be started or reached.
   */
  async run(job: RenderRequest): Promise<RenderOutcome> {
    if (this.closed) throw unavailable();
    const sup = this.start();
    try {
      await sup.ready;
    } catch (err) {
      throw unavailable(err);
    }
    if (this.jobs++ === 0) sup.hold(true);
    try {
      return await this.send(sup, job);
    } finally {
      if (--this.jobs === 0) sup.hold(false);
    }
  }

  private send(sup: Supervisor, job: RenderRequest): Promise<RenderOutcome> {
    return new Promise<RenderOutcome>((resolve, reject) => {
      const { timeoutMs, log } = this.opts;
      let proc: Proc | undefined;
      let socket: Socket | undefined;
      let grace: NodeJS.Timeout | undefined;
      let settled = false;
      let timer = setTimeout(() => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        fail(unavailable(new Error('no render process started in time')));
      }, START_TIMEOUT_MS);

      const finish = (keep: boolean) => {
        settled = true;
        clearTimeout(timer);
        clearTimeout(grace);
        socket?.destroy();
        if (proc?.job === entry) {
          // Free for the next job only when it answered in full; otherwise it is ended.
          if (keep) this.release(sup, proc);
          else {
            this.end(sup, proc);
            this.spare(sup, true);
          }
        }
      };
      const fail = (err: Error) => {
        if (settled) return;
        finish(false);
        reject(err);
      };
      // The connection broke before a whole answer: its process died (`died` says so at once), or its
      // socket is unusable. Either way the job ends here, never hangs.
      const lost = (cause: unknown) => {
        if (settled || grace) return;
        grace = setTimeout(() => {
          log?.warn({ err: cause }, 'an image render process could not be reached; it was ended');
          fail(unavailable(cause));
        }, VERDICT_GRACE_MS);
      };
      const answered = (a: AnswerHeader, data: Buffer) => {
        if (settled) return;
        finish(true);
        switch (a.kind) {
          case 'done':
            return resolve({ data, format: a.format, width: a.width, height: a.height });
          case 'reroute':
          case 'gone':
            return resolve(a.kind);
          case 'failed':
            return reject(new AppError(a.code, a.message));
          default:
            return reject(unavailable());
        }
      };

      const entry: Job = {
        take: (got) => {
          if (settled) {
            if (!(got instanceof Error)) this.release(sup, got);
            return;
          }
          if (got instanceof Error) return fail(unavailable(got));
          proc = got;
          got.job = entry;
          this.lastStarted = { pid: got.pid, socket: got.socket };
          // The render begins now: its time limit with it.
          clearTimeout(timer);
          timer = setTimeout(() => {
            this.stats.timeouts++;
            log?.warn({ timeoutMs }, 'an image render ran out of time; its process was killed');
            fail(
              new AppError(
                'IMAGE_TIMEOUT',
                `The image transformation took longer than ${timeoutMs / 1000} s and was stopped.`,
              ),
            );
          }, timeoutMs);
          socket = this.connect(got.socket, job, answered, lost);
        },
        died: (reason) => {
          if (settled) return;
          if (reason instanceof Error) return fail(unavailable(reason));
          // The process died under the job (out of memory, a crash in a decoder): the input did it.
          this.stats.crashes++;
          log?.warn({ reason }, 'an image render process died while rendering');
          fail(new AppError('IMAGE_CORRUPT', 'The image could not be transformed.'));
        },
      };
      const free = this.idle.pop();
      if (free) entry.take(free);
      else {
        this.waiting.push(entry);
        this.spare(sup);
      }
    });
  }

  /** Sends the job over the process's socket and reads its answer. */
  private connect(
    at: string,
    job: RenderRequest,
    answered: (a: AnswerHeader, data: Buffer) => void,
    lost: (cause: unknown) => void,
  ): Socket {
    const header: JobHeader = {
      params: job.params,
      choice: job.choice,
      limits: job.limits,
      length: job.file ? 0 : (job.input?.length ?? 0),
      file: job.file,
    };
    const reader = new FrameReader<AnswerHeader & { length?: number }>(MAX_ANSWER);
    const s = createConnection(at);
    s.cork();
    for (const b of frame(header, job.file ? undefined : job.input)) s.write(b);
    s.uncork();
    s.on('data', (chunk: Buffer) => {
      let got: ReturnType<typeof reader.push>;
      try {
        got = reader.push(chunk);
      } catch (err) {
        s.destroy();
        return lost(err);
      }
      if (got) answered(got.header, got.payload);
    });
    s.on('error', (err) => lost(err));
    s.on('close', () => lost(new Error('the render process closed its connection before answering')));
    return s;
  }

  /** Stops the supervisor and its processes; jobs still out fail with IMAGE_RENDERER_UNAVAILABLE. */
  async close(): Promise<void> {
    this.closed = true;
    const sup = this.supervisor;
    if (!sup?.alive || sup.child.exitCode !== null || sup.child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      sup.child.once('exit', () => resolve());
      sup.child.ref(); // an idle supervisor is unreferenced: its exit must still be waited for
      // Disconnecting lets it end its render processes before it exits.
      sup.child.disconnect();
    });
  }
}
