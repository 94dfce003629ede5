/**
 * Password hashing and checks. New hashes are argon2id with the ARGON2_* parameters; HBP's bcrypt hashes
 * still verify and are replaced on the next successful login. All hashing runs on a small pool of
 * low-priority threads (password-worker.mjs), never on the event loop and never on libuv's thread pool,
 * where it would make file I/O, JWT signing and image work wait behind it.
 *
 * Failed logins cost the same whatever the account's state (see `checkLoginPassword`).
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';

/** Work for a hashing thread (password-worker.mjs). */
type HashJob =
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

interface Pending {
  id: number;
  job: HashJob;
  resolve(value: string | boolean): void;
  reject(err: Error): void;
}

/**
 * A fixed set of hashing threads with one FIFO queue: each thread runs one job at a time, so a job never
 * waits behind another thread's backlog. Threads are unreferenced while idle (an idle pool does not keep
 * the process alive) and replaced if one dies.
 */
class HashPool {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Pending>();
  private readonly queue: Pending[] = [];
  private nextId = 1;
  private started = 0;

  constructor(readonly size: number) {}

  run(job: HashJob): Promise<string | boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, job, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      const worker = this.idle.pop() ?? (this.started < this.size ? this.spawn() : undefined);
      if (!worker) return;
      const next = this.queue.shift() as Pending;
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

let pool: HashPool | undefined;

/** The process-wide hashing pool, sized by the first configuration that asks (PASSWORD_HASH_THREADS). */
function hashPool(config?: Pick<Config, 'PASSWORD_HASH_THREADS'>): HashPool {
  pool ??= new HashPool(config?.PASSWORD_HASH_THREADS || availableParallelism());
  return pool;
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

export async function hashPassword(
  config: ArgonConfig & Pick<Config, 'PASSWORD_HASH_THREADS'>,
  password: string,
): Promise<string> {
  return (await hashPool(config).run(hashJob(configuredKind(config), password) as HashJob)) as string;
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

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  const kind = hashKind(stored);
  // A malformed stored hash never matches.
  if (kind === undefined) return false;
  notify(kind, false);
  return (await hashPool().run({ op: 'verify', stored, password })) === true;
}

const dummies = new Map<string, Promise<string | undefined>>();

/** Spends what checking a password against a hash of `kind` costs, and fails. */
async function verifyDummyOfKind(
  config: Pick<Config, 'PASSWORD_HASH_THREADS'>,
  kind: string,
  password: string,
): Promise<void> {
  let dummy = dummies.get(kind);
  if (!dummy) {
    const job = hashJob(kind, 'gatehouse-dummy-password-for-timing');
    dummy = job ? (hashPool(config).run(job) as Promise<string>) : Promise.resolve(undefined);
    dummy.catch(() => dummies.delete(kind));
    dummies.set(kind, dummy);
  }
  // A kind no dummy can be made of (a cost out of range) fails just as fast when verified for real.
  const stored = await dummy.catch(() => undefined);
  if (stored === undefined) return;
  notify(kind, true);
  await hashPool(config).run({ op: 'verify', stored, password });
}

/**
 * Spends the same time as checking a real password, for a caller whose email matched no account, and
 * always fails. The dummy hash uses the configured parameters, so the cost matches.
 */
export async function verifyDummy(
  config: ArgonConfig & Pick<Config, 'PASSWORD_HASH_THREADS'>,
  password: string,
): Promise<false> {
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
 */
export async function checkLoginPassword(
  config: ArgonConfig & Pick<Config, 'PASSWORD_HASH_THREADS'>,
  stored: string | null | undefined,
  password: string,
  kindsInUse: () => Promise<readonly string[]>,
): Promise<boolean> {
  const ownKind = stored ? hashKind(stored) : undefined;
  let spent: string;
  if (stored && ownKind) {
    if (await verifyPassword(stored, password)) return true;
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
