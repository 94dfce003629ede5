/**
 * The MD5 of an upload (its ETag), computed beside the stream instead of on the event loop: MD5 runs at
 * about 500 MB/s on one core, and was the largest single cost of a large upload (about 40% of the main
 * thread's time, docs/performance.md). A file that ends within its first MiB is hashed inline (no thread
 * hop for small files); past that, the bytes are copied into 1 MiB blocks and hashed on one worker thread
 * shared by all uploads. At most MAX_BEHIND blocks of a stream wait for the worker: when it falls behind,
 * `update` returns a promise and the upload waits, so memory stays bounded.
 */
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';

/** Bytes per block handed to the worker; streams shorter than this are hashed inline. */
export const BLOCK = 1024 * 1024;
/** Blocks of one stream queued on the worker before its writer waits. */
const MAX_BEHIND = 4;
/** Spare blocks kept for reuse across uploads. */
const MAX_SPARE = 8;

/** Messages to md5-worker.mjs. */
export type ToWorker =
  | { kind: 'data'; id: number; block: ArrayBuffer; length: number }
  | { kind: 'end'; id: number }
  | { kind: 'drop'; id: number };

/** Messages from md5-worker.mjs. */
export type FromWorker =
  | { kind: 'done'; id: number; block: ArrayBuffer }
  | { kind: 'digest'; id: number; hex: string };

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: Error) => void;
}

interface Job {
  behind: number;
  error?: Error;
  /** A writer waiting for the worker to catch up. */
  waiting?: Waiter<void>;
  digest?: Waiter<string>;
}

/** The worker thread shared by every upload in the process; started on first use, replaced after a crash. */
class HashThread {
  private readonly worker: Worker;
  private readonly jobs = new Map<number, Job>();
  private readonly spare: ArrayBuffer[] = [];
  private nextId = 1;
  broken = false;

  constructor() {
    this.worker = new Worker(new URL('./md5-worker.mjs', import.meta.url));
    // Idle, it must not keep the process alive; with a job open, it must (someone awaits it).
    this.worker.unref();
    this.worker.on('message', (m: FromWorker) => this.onMessage(m));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`the hashing thread exited with code ${code}`)));
  }

  block(): ArrayBuffer {
    return this.spare.pop() ?? new ArrayBuffer(BLOCK);
  }

  open(): { id: number; job: Job } {
    if (this.jobs.size === 0) this.worker.ref();
    const id = this.nextId++;
    const job: Job = { behind: 0 };
    this.jobs.set(id, job);
    return { id, job };
  }

  data(id: number, job: Job, block: ArrayBuffer, length: number): void {
    job.behind++;
    this.post({ kind: 'data', id, block, length }, [block]);
  }

  end(id: number, job: Job): Promise<string> {
    const hex = new Promise<string>((resolve, reject) => {
      job.digest = { resolve, reject };
    });
    this.post({ kind: 'end', id });
    return hex;
  }

  drop(id: number): void {
    if (!this.jobs.has(id)) return;
    this.post({ kind: 'drop', id });
    this.close(id);
  }

  private post(m: ToWorker, transfer: ArrayBuffer[] = []): void {
    if (!this.broken) this.worker.postMessage(m, transfer);
  }

  private close(id: number): void {
    this.jobs.delete(id);
    if (this.jobs.size === 0) this.worker.unref();
  }

  private onMessage(m: FromWorker): void {
    const job = this.jobs.get(m.id);
    if (m.kind === 'done') {
      if (this.spare.length < MAX_SPARE) this.spare.push(m.block);
      if (!job) return;
      job.behind--;
      const waiting = job.waiting;
      job.waiting = undefined;
      waiting?.resolve();
      return;
    }
    this.close(m.id);
    job?.digest?.resolve(m.hex);
  }

  private fail(err: Error): void {
    if (this.broken) return;
    this.broken = true;
    if (shared === this) shared = undefined;
    for (const job of this.jobs.values()) {
      job.error = err;
      job.waiting?.reject(err);
      job.digest?.reject(err);
    }
    this.jobs.clear();
  }
}

let shared: HashThread | undefined;

/** One stream's MD5: `update` with each chunk in order (awaiting it when it returns a promise), then `digest`. */
export class StreamMd5 {
  /** The first bytes, kept by reference until they reach a block (or the stream ends short of one). */
  private head: Uint8Array[] = [];
  private headLength = 0;
  private thread: HashThread | undefined;
  private id = 0;
  private job: Job | undefined;
  private block: Uint8Array | undefined;
  private filled = 0;

  /** Adds bytes. A returned promise means "wait for it before the next update". */
  update(chunk: Uint8Array): Promise<void> | undefined {
    if (!this.job) {
      this.head.push(chunk);
      this.headLength += chunk.length;
      if (this.headLength < BLOCK) return undefined;
      this.start();
      return this.pace();
    }
    this.copy(chunk);
    return this.pace();
  }

  /** The hex digest of everything added. */
  async digest(): Promise<string> {
    if (!this.thread || !this.job) {
      const hash = createHash('md5');
      for (const c of this.head) hash.update(c);
      this.head = [];
      return hash.digest('hex');
    }
    if (this.job.error) throw this.job.error;
    if (this.filled > 0) this.handOff();
    return this.thread.end(this.id, this.job);
  }

  /** Forgets the stream (an upload that failed); safe at any time, and more than once. */
  dispose(): void {
    this.head = [];
    if (this.thread) this.thread.drop(this.id);
  }

  private start(): void {
    if (!shared || shared.broken) shared = new HashThread();
    this.thread = shared;
    const { id, job } = this.thread.open();
    this.id = id;
    this.job = job;
    const head = this.head;
    this.head = [];
    for (const c of head) this.copy(c);
  }

  private copy(chunk: Uint8Array): void {
    const thread = this.thread as HashThread;
    let at = 0;
    while (at < chunk.length) {
      this.block ??= new Uint8Array(thread.block());
      const n = Math.min(chunk.length - at, BLOCK - this.filled);
      this.block.set(chunk.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled === BLOCK) this.handOff();
    }
  }

  private handOff(): void {
    const block = this.block as Uint8Array;
    (this.thread as HashThread).data(this.id, this.job as Job, block.buffer as ArrayBuffer, this.filled);
    this.block = undefined;
    this.filled = 0;
  }

  private pace(): Promise<void> | undefined {
    const job = this.job as Job;
    if (job.error) return Promise.reject(job.error);
    if (job.behind < MAX_BEHIND) return undefined;
    return new Promise<void>((resolve, reject) => {
      job.waiting = { resolve, reject };
    });
  }
}
