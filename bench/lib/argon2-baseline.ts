/**
 * Child process: raw argon2id verify rate with the given parameters at the given concurrency, with the
 * same library as the service, on libuv's pool sized by the caller (UV_THREADPOOL_SIZE) to the service's
 * PASSWORD_HASH_THREADS, at the service's hashing priority (the nice value, optional 6th argument, set on
 * every thread of this process once libuv's pool exists), so that on a machine shared with other work
 * both sides get the same share of it. Prints `{ "perSec": n }`.
 */
import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';
import { hash, verify } from '@node-rs/argon2';

const [memoryCost, timeCost, parallelism, concurrency, durationMs, nice = 0] = process.argv
  .slice(2)
  .map(Number) as [number, number, number, number, number, number?];
const h = await hash('correct horse battery staple', { memoryCost, timeCost, parallelism, algorithm: 2 });
// The pool's threads exist now (libuv starts them all on the first job); on Linux each thread has its own
// nice value, set here by thread id.
if (nice !== 0) for (const tid of readdirSync('/proc/self/task')) setPriority(Number(tid), nice);
let done = 0;
const end = Date.now() + durationMs;
const started = Date.now();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      if (!(await verify(h, 'correct horse battery staple'))) throw new Error('verify failed');
      done++;
    }
  }),
);
process.stdout.write(JSON.stringify({ perSec: done / ((Date.now() - started) / 1000) }));
