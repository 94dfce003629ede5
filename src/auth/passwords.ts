/**
 * Password hashing and checks. New hashes are argon2id with the ARGON2_* parameters; HBP's bcrypt hashes
 * still verify and are replaced on the next successful login. All hashing runs on a small pool of
 * low-priority threads (password-worker.mjs), never on the event loop and never on libuv's thread pool,
 * where it would make file I/O, JWT signing and image work wait behind it.
 *
 * Failed logins cost the same whatever the account's state (see `checkLoginPassword`).
 *
 * The pool's waiting line is bounded (PASSWORD_HASH_QUEUE): past it, a job is refused at once with 503
 * PASSWORD_HASHING_BUSY and a `Retry-After` estimated from measured job durations, rather than making
 * every caller of a flood wait seconds while memory grows. Callers let that error through as it is.
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { hashRefusedEvent, hashWaitEvent } from '../metrics/events.ts';

/** Work for a hashing thread (password-worker.mjs). */
export type HashJob =
  | { op: 'verify'; stored: string; password: string }
  | {
      op: 'argon2-hash';
      password: string;
      options: {
        algorithm: number;
        version: number;
        memoryCost: number;
        timeCost: number;
        parallelism: number;
      };
    }
  | { op: 'bcrypt-hash'; password: string; cost: number };

type HashReply = { id: number; ok: true; value: string | boolean } | { id: number; ok: false; error: string };

const ARGON2_ALGORITHMS: Record<string, number> = { argon2d: 0, argon2i: 1, argon2id: 2 };
const ARGON2_VERSIONS: Record<string, number> = { '16': 0, '19': 1 }; // Version.V0x10, Version.V0x13

/**
 * Nice value of the hashing threads. Against the event loop's 0, 10 weighs about 1:9 with Linux's
 * scheduler, so a request that arrives takes the CPU from hashing at once; unlike 19 (1:70), it does not
 * starve logins when unrelated processes keep the machine busy.
 */
const HASH_THREAD_NICE = 10;

/** Jobs allowed to wait per hashing thread when PASSWORD_HASH_QUEUE is 0 (automatic). */
export const AUTO_QUEUE_PER_THREAD = 64;

/** Weight of the newest job in the moving average of job durations (about the last ten jobs count). */
const DURATION_WEIGHT = 0.2;

/**
 * Seconds (whole, at least 1) until a job refused now would find room: the jobs ahead of it, waiting
 * and running, shared out over the threads at the measured mean duration of a job.
 */
export function retryAfterSeconds(waiting: number, running: number, meanMs: number, threads: number): number {
  const ms = ((waiting + running) * meanMs) / Math.max(1, threads);
  return Number.isFinite(ms) ? Math.max(1, Math.ceil(ms / 1000)) : 1;
}

/** The refusal of a job that found the waiting line full (503 with Retry-After). */
export function hashingBusy(retryAfter: number): AppError {
  return new AppError('PASSWORD_HASHING_BUSY', undefined, { headers: { 'retry-after': String(retryAfter) } });
}

/** True for the refusal of a full hashing queue, which every caller passes on untouched. */
export function isHashingBusy(err: unknown): err is AppError {
  return err instanceof AppError && err.code === 'PASSWORD_HASHING_BUSY';
}

interface Pending {
  id: number;
  job: HashJob;
  resolve(value: string | boolean): void;
  reject(err: Error): void;
  /** performance.now() when the job was queued. */
  queuedAt: number;
  /** performance.now() when a thread took the job. */
  startedAt?: number;
}

/**
 * A fixed set of hashing threads with one FIFO queue: each thread runs one job at a time, so a job never
 * waits behind another thread's backlog. Threads are unreferenced while idle (an idle pool does not keep
 * the process alive) and replaced if one dies. At most `maxWaiting` jobs (given per job, from the
 * caller's configuration) wait for a thread; one more is refused at once (PASSWORD_HASHING_BUSY).
 */
export class HashPool {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Pending>();
  private readonly queue: Pending[] = [];
  private nextId = 1;
  private started = 0;
  /** Moving average of how long a thread spends on a job, in ms; undefined until one finishes. */
  private meanMs: number | undefined;

  constructor(readonly size: number) {}

  /** Jobs waiting for a thread and jobs running now. */
  get stats(): { waiting: number; running: number; meanMs: number | undefined } {
    return { waiting: this.queue.length, running: this.running.size, meanMs: this.meanMs };
  }

  run(job: HashJob, maxWaiting: number = AUTO_QUEUE_PER_THREAD * this.size): Promise<string | boolean> {
    const threadFree = this.idle.length > 0 || this.started < this.size;
    if (!threadFree && this.queue.length >= maxWaiting) {
      hashRefusedEvent();
      return Promise.reject(hashingBusy(this.retryAfter()));
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, job, resolve, reject, queuedAt: performance.now() });
      this.dispatch();
    });
  }

  /** Retry-After for a job refused now (see retryAfterSeconds). */
  retryAfter(): number {
    let mean = this.meanMs;
    if (mean === undefined) {
      // Nothing has finished yet: the oldest running job has taken at least this long.
      const now = performance.now();
      mean = 0;
      for (const p of this.running.values()) mean = Math.max(mean, now - (p.startedAt ?? now));
    }
    return retryAfterSeconds(this.queue.length, this.running.size, mean, this.size);
  }

  private measured(ms: number): void {
    this.meanMs = this.meanMs === undefined ? ms : this.meanMs + DURATION_WEIGHT * (ms - this.meanMs);
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      const worker = this.idle.pop() ?? (this.started < this.size ? this.spawn() : undefined);
      if (!worker) return;
      const next = this.queue.shift() as Pending;
      next.startedAt = performance.now();
      hashWaitEvent((next.startedAt - next.queuedAt) / 1000);
      this.running.set(worker, next);
      worker.ref();
      worker.postMessage({ id: next.id, job: next.job });
    }
  }

  private spawn(): Worker {
    this.started++;
    const worker = new Worker(new URL('./password-worker.mjs', import.meta.url), {
      workerData: { nice: HASH_THREAD_NICE },
    });
    worker.on('message', (reply: HashReply) => {
      const job = this.running.get(worker);
      if (!job || job.id !== reply.id) return;
      this.running.delete(worker);
      if (job.startedAt !== undefined) this.measured(performance.now() - job.startedAt);
      worker.unref();
      this.idle.push(worker);
      if (reply.ok) job.resolve(reply.value);
      else job.reject(new Error(reply.error));
      this.dispatch();
    });
    const lost = (err: Error) => {
      const job = this.running.get(worker);
      this.running.delete(worker);
      const at = this.idle.indexOf(worker);
      if (at >= 0) this.idle.splice(at, 1);
      this.started--;
      job?.reject(err);
      this.dispatch();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`password hashing thread exited with code ${code}`)));
    return worker;
  }
}

type PoolConfig = Pick<Config, 'PASSWORD_HASH_THREADS' | 'PASSWORD_HASH_QUEUE'>;

let pool: HashPool | undefined;

/** Jobs waiting for and running on the process-wide hashing pool (zero before its first job). */
export function hashPoolStats(): { waiting: number; running: number; threads: number } {
  if (!pool) return { waiting: 0, running: 0, threads: 0 };
  const { waiting, running } = pool.stats;
  return { waiting, running, threads: pool.size };
}

/**
 * Runs `job` on the process-wide hashing pool, sized by the first configuration that asks
 * (PASSWORD_HASH_THREADS); the waiting line is bounded by the asking configuration's
 * PASSWORD_HASH_QUEUE (0: AUTO_QUEUE_PER_THREAD per thread). Rejects with PASSWORD_HASHING_BUSY when full.
 */
function runHashJob(config: PoolConfig, job: HashJob): Promise<string | boolean> {
  pool ??= new HashPool(config.PASSWORD_HASH_THREADS || availableParallelism());
  return pool.run(job, config.PASSWORD_HASH_QUEUE || AUTO_QUEUE_PER_THREAD * pool.size);
}

/**
 * What a verification against a stored hash costs, as a string: `$argon2id$v=19$m=19456,t=2,p=1` or
 * `bcrypt$10`; undefined for a hash this service cannot verify (it never matches, at no cost).
 */
export function hashKind(stored: string): string | undefined {
  const b = /^\$2[aby]\$(\d\d)\$/.exec(stored);
  if (b) return `bcrypt$${b[1]}`;
  const a = /^\$(argon2(?:id|i|d))\$v=(16|19)\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(stored);
  return a ? `$${a[1]}$v=${a[2]}$m=${a[3]},t=${a[4]},p=${a[5]}` : undefined;
}

type ArgonConfig = Pick<Config, 'ARGON2_MEMORY_COST' | 'ARGON2_TIME_COST' | 'ARGON2_PARALLELISM'>;

/** The kind of the hashes this configuration makes. */
export function configuredKind(config: ArgonConfig): string {
  return `$argon2id$v=19$m=${config.ARGON2_MEMORY_COST},t=${config.ARGON2_TIME_COST},p=${config.ARGON2_PARALLELISM}`;
}

/** A job that hashes `password` into a new hash of `kind`; undefined for a kind this service cannot make. */
function hashJob(kind: string, password: string): HashJob | undefined {
  const b = /^bcrypt\$(\d\d)$/.exec(kind);
  if (b) return { op: 'bcrypt-hash', password, cost: Number(b[1]) };
  const a = /^\$(argon2(?:id|i|d))\$v=(16|19)\$m=(\d+),t=(\d+),p=(\d+)$/.exec(kind);
  if (!a) return undefined;
  return {
    op: 'argon2-hash',
    password,
    options: {
      algorithm: ARGON2_ALGORITHMS[a[1] as string] as number,
      version: ARGON2_VERSIONS[a[2] as string] as number,
      memoryCost: Number(a[3]),
      timeCost: Number(a[4]),
      parallelism: Number(a[5]),
    },
  };
}

export async function hashPassword(config: ArgonConfig & PoolConfig, password: string): Promise<string> {
  return (await runHashJob(config, hashJob(configuredKind(config), password) as HashJob)) as string;
}

/** True when a stored hash should be replaced: bcrypt, or argon2 of another kind than configured. */
export function needsRehash(config: ArgonConfig, stored: string): boolean {
  const kind = hashKind(stored);
  return kind !== undefined && kind !== configuredKind(config);
}

/** One password verification, real (against an account's hash) or dummy (a failed login's padding). */
export interface VerificationEvent {
  kind: string;
  dummy: boolean;
}

const observers = new Set<(e: VerificationEvent) => void>();

/** Calls `fn` for every verification started in this process (tests check which ones ran); returns the unsubscribe. */
export function observeVerifications(fn: (e: VerificationEvent) => void): () => void {
  observers.add(fn);
  return () => observers.delete(fn);
}

function notify(kind: string, dummy: boolean): void {
  for (const fn of observers) fn({ kind, dummy });
}

export async function verifyPassword(config: PoolConfig, stored: string, password: string): Promise<boolean> {
  const kind = hashKind(stored);
  // A malformed stored hash never matches.
  if (kind === undefined) return false;
  notify(kind, false);
  return (await runHashJob(config, { op: 'verify', stored, password })) === true;
}

const dummies = new Map<string, Promise<string | undefined>>();

/** Spends what checking a password against a hash of `kind` costs, and fails. */
async function verifyDummyOfKind(config: PoolConfig, kind: string, password: string): Promise<void> {
  let dummy = dummies.get(kind);
  if (!dummy) {
    const job = hashJob(kind, 'gatehouse-dummy-password-for-timing');
    dummy = job ? (runHashJob(config, job) as Promise<string>) : Promise.resolve(undefined);
    dummy.catch(() => dummies.delete(kind));
    dummies.set(kind, dummy);
  }
  // A kind no dummy can be made of (a cost out of range) fails just as fast when verified for real. A
  // full queue is no such case: the caller gets the same 503 as for a real account, never a quick 401.
  const stored = await dummy.catch((err: unknown) => {
    if (isHashingBusy(err)) throw err;
    return undefined;
  });
  if (stored === undefined) return;
  notify(kind, true);
  await runHashJob(config, { op: 'verify', stored, password });
}

/**
 * Spends the same time as checking a real password, for a caller whose email matched no account, and
 * always fails. The dummy hash uses the configured parameters, so the cost matches.
 */
export async function verifyDummy(config: ArgonConfig & PoolConfig, password: string): Promise<false> {
  await verifyDummyOfKind(config, configuredKind(config), password);
  return false;
}

/**
 * The password check of a sign-in, against an account's stored hash (or none: unknown email, or an
 * account without a password). A failure costs one verification of every kind in
 * `{configured} ∪ kindsInUse()`, whatever the account: the real hash's own kind is verified for real and
 * every other kind against a dummy, so an unknown email, a wrong password on a current argon2id
 * account, on a legacy bcrypt account or on an account hashed with older ARGON2_* settings all take the
 * same work and answer in the same time. `kindsInUse` is asked only on failure (a success costs one
 * verification), and once no legacy hash is left a failure costs one argon2id verification again.
 * A full hashing queue rejects with PASSWORD_HASHING_BUSY at any of these steps, for every account alike.
 */
export async function checkLoginPassword(
  config: ArgonConfig & PoolConfig,
  stored: string | null | undefined,
  password: string,
  kindsInUse: () => Promise<readonly string[]>,
): Promise<boolean> {
  const ownKind = stored ? hashKind(stored) : undefined;
  let spent: string;
  if (stored && ownKind) {
    if (await verifyPassword(config, stored, password)) return true;
    spent = ownKind;
  } else {
    spent = configuredKind(config);
    await verifyDummyOfKind(config, spent, password);
  }
  const kinds = new Set([configuredKind(config), ...(await kindsInUse())]);
  kinds.delete(spent);
  // One after the other, as the real verification ran: the total is what matches, not the overlap.
  for (const kind of [...kinds].sort()) await verifyDummyOfKind(config, kind, password);
  return false;
}

/**
 * Pwned Passwords check by k-anonymity: only the first 5 hex digits of the SHA-1 leave the process.
 * Throws PASSWORD_TOO_WEAK when the password appears in a breach. When the service cannot be reached,
 * HIBP_FAIL_OPEN decides: accept, or refuse with PASSWORD_CHECK_UNAVAILABLE (503).
 */
export async function checkBreached(config: Config, password: string): Promise<void> {
  if (!config.HIBP_ENABLED) return;
  const sha1 = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase();
  const prefix = sha1.slice(0, 5);
  const suffix = sha1.slice(5);
  let body: string;
  try {
    const base = config.HIBP_ENDPOINT.endsWith('/') ? config.HIBP_ENDPOINT : `${config.HIBP_ENDPOINT}/`;
    const res = await fetch(`${base}${prefix}`, {
      signal: AbortSignal.timeout(config.HIBP_TIMEOUT_MS),
      // Padding makes every answer about the same size, so its length says nothing about the prefix.
      headers: { 'Add-Padding': 'true', 'User-Agent': 'gatehouse' },
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    body = await res.text();
  } catch (err) {
    if (config.HIBP_FAIL_OPEN) return;
    throw new AppError('PASSWORD_CHECK_UNAVAILABLE', undefined, { cause: err });
  }
  for (const line of body.split('\n')) {
    const [hashSuffix, count] = line.trim().split(':');
    if (hashSuffix?.toUpperCase() === suffix && Number(count) > 0) throw new AppError('PASSWORD_TOO_WEAK');
  }
}
