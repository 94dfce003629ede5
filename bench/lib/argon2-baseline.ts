/**
 * Child process: raw argon2id verify rate with the given parameters at the given concurrency, with the
 * same library as the service, on libuv's pool sized by the caller (UV_THREADPOOL_SIZE) to the service's
 * PASSWORD_HASH_THREADS. Prints `{ "perSec": n }`.
 */
import { hash, verify } from '@node-rs/argon2';

const [memoryCost, timeCost, parallelism, concurrency, durationMs] = process.argv.slice(2).map(Number) as [
  number,
  number,
  number,
  number,
  number,
];
const h = await hash('correct horse battery staple', { memoryCost, timeCost, parallelism, algorithm: 2 });
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
