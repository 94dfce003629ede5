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
 */
import { type ChildProcess, fork } from 'node:child_process';
import { getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger } from 'fastify';
import { AppError, type ErrorCode } from '../../errors.ts';
import type { FormatChoice, ImageParams } from './params.ts';
import type { OutputFormat, RenderLimits, RenderResult } from './pipeline.ts';

/** A job sent to a render process. */
export interface RenderRequest {
  id: number;
  input: Uint8Array;
  params: ImageParams;
  choice: FormatChoice;
  limits: RenderLimits;
}

/** What a render process sends back. `ready` (id 0) once, when it can take jobs. */
export type RenderAnswer =
  | { id: number; kind: 'ready' }
  | { id: number; kind: 'done'; data: Uint8Array; format: OutputFormat; width: number; height: number }
  | { id: number; kind: 'reroute' }
  | { id: number; kind: 'failed'; code: ErrorCode; message: string };

/** A finished render, or `reroute` when the input is not a raster image and belongs to the SVG lane. */
export type RenderOutcome = RenderResult | 'reroute';

export interface PoolOptions {
  /** Added to the service's own nice value for these processes (at most 19 in all). */
  niceness: number;
  /** Longest a render may take, in milliseconds, from the job reaching its process. */
  timeoutMs: number;
  log?: FastifyBaseLogger | undefined;
}

/** Longest a job may wait for its render process to start (a fresh one loads sharp first). */
const START_TIMEOUT_MS = 60_000;

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

/** Messages of the supervisor (render-supervisor.mjs), on top of the render processes' answers. */
type SupervisorMessage =
  | { kind: 'ready' }
  | { id: number; kind: 'started' }
  | { id: number; kind: 'unavailable' }
  | { id: number; kind: 'crashed'; reason: string }
  | RenderAnswer;

interface Job {
  settle(answer: SupervisorMessage | Error): void;
}

/** The supervisor process of a pool, started once (forking the service is what costs). */
class Supervisor {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  alive = true;

  constructor(niceness: number, onMessage: (m: SupervisorMessage) => void, onExit: (err: Error) => void) {
    this.child = fork(SUPERVISOR, [BODY], {
      execArgv: [],
      env: childEnv(),
      serialization: 'advanced',
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

  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
    this.alive = false;
  }
}

/**
 * The render processes of one lane, behind their supervisor; `run` hands a job over and bounds the time
 * its render takes.
 */
export class RenderPool {
  private supervisor: Supervisor | undefined;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private closed = false;
  /** Renders ended by the time limit, and render processes that died under a job. */
  readonly stats = { timeouts: 0, crashes: 0 };

  constructor(private readonly opts: PoolOptions) {}

  /** Whether this lane's processes were ever started. */
  get started(): boolean {
    return this.supervisor !== undefined;
  }

  private start(): Supervisor {
    if (this.supervisor?.alive) return this.supervisor;
    const sup = new Supervisor(
      this.opts.niceness,
      (m) => {
        if ('id' in m) this.jobs.get(m.id)?.settle(m);
      },
      (err) => {
        if (this.supervisor === sup && !this.closed)
          this.opts.log?.error(
            { err },
            'the image render supervisor stopped; it is restarted on the next job',
          );
        for (const job of [...this.jobs.values()]) job.settle(err);
      },
    );
    this.supervisor = sup;
    return sup;
  }

  /**
   * Renders in a process of the pool. Throws the render's AppError (415/422), IMAGE_TIMEOUT (422) when
   * it ran out of time (its process is killed), or IMAGE_RENDERER_UNAVAILABLE (503) when no process
   * could be started.
   */
  async run(job: Omit<RenderRequest, 'id'>): Promise<RenderOutcome> {
    if (this.closed) throw unavailable();
    const sup = this.start();
    try {
      await sup.ready;
    } catch (err) {
      throw unavailable(err);
    }
    const id = this.nextId++;
    if (this.jobs.size === 0) sup.hold(true);
    try {
      return await this.send(sup, { ...job, id });
    } finally {
      this.jobs.delete(id);
      if (this.jobs.size === 0) sup.hold(false);
    }
  }

  private send(sup: Supervisor, job: RenderRequest): Promise<RenderOutcome> {
    return new Promise<RenderOutcome>((resolve, reject) => {
      const { timeoutMs, log } = this.opts;
      let timer = setTimeout(
        () => settle(unavailable(new Error('no render process started in time'))),
        START_TIMEOUT_MS,
      );
      const settle = (answer: SupervisorMessage | Error) => {
        if (!(answer instanceof Error) && answer.kind === 'started') {
          if (!this.jobs.has(job.id)) return;
          // The render begins now: its time limit with it.
          clearTimeout(timer);
          timer = setTimeout(() => {
            this.stats.timeouts++;
            log?.warn({ timeoutMs }, 'an image render ran out of time; its process was killed');
            settle(
              new AppError(
                'IMAGE_TIMEOUT',
                `The image transformation took longer than ${timeoutMs / 1000} s and was stopped.`,
              ),
            );
          }, timeoutMs);
          return;
        }
        if (!this.jobs.has(job.id)) return;
        this.jobs.delete(job.id);
        clearTimeout(timer);
        if (answer instanceof AppError) {
          if (sup.alive) sup.child.send({ type: 'cancel', id: job.id });
          return reject(answer);
        }
        if (answer instanceof Error) return reject(unavailable(answer));
        switch (answer.kind) {
          case 'done':
            return resolve({
              data: Buffer.from(answer.data.buffer, answer.data.byteOffset, answer.data.byteLength),
              format: answer.format,
              width: answer.width,
              height: answer.height,
            });
          case 'reroute':
            return resolve('reroute');
          case 'failed':
            return reject(new AppError(answer.code, answer.message));
          case 'crashed':
            // The process died under the job (out of memory, a crash in a decoder): the input did it.
            this.stats.crashes++;
            log?.warn({ reason: answer.reason }, 'an image render process died while rendering');
            return reject(new AppError('IMAGE_CORRUPT', 'The image could not be transformed.'));
          default:
            return reject(unavailable());
        }
      };
      this.jobs.set(job.id, { settle });
      sup.child.send({ type: 'job', id: job.id, job }, (err) => {
        if (err) settle(err);
      });
    });
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
