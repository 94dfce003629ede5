/**
 * A password-hashing thread (see passwords.ts, which also declares the job and reply types). Plain
 * JavaScript, because worker threads load their module without the TypeScript loader of the tests;
 * the build copies it to dist/ as it is.
 *
 * It runs one job at a time, synchronously, at a lower scheduling priority than the event loop: when the CPU is short,
 * the event loop and the HTTP traffic it serves go first and hashing takes what is left, so a burst of
 * logins slows logins down instead of every other request.
 */
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { hashSync as argon2HashSync, verifySync as argon2VerifySync } from '@node-rs/argon2';
import bcrypt from 'bcryptjs';

const BCRYPT = /^\$2[aby]\$\d\d\$/;

function run(job) {
  switch (job.op) {
    case 'verify':
      try {
        return BCRYPT.test(job.stored)
          ? bcrypt.compareSync(job.password, job.stored)
          : argon2VerifySync(job.stored, job.password);
      } catch {
        // A malformed stored hash never matches.
        return false;
      }
    case 'argon2-hash':
      return argon2HashSync(job.password, job.options);
    case 'bcrypt-hash':
      return bcrypt.hashSync(job.password, job.cost);
    default:
      throw new Error(`unknown hashing job ${job.op}`);
  }
}

if (parentPort) {
  const port = parentPort;
  const nice = workerData?.nice ?? 0;
  try {
    // On Linux, pid 0 is the calling thread only: the event loop keeps its own priority.
    if (nice !== 0) setPriority(0, nice);
  } catch {
    // Not permitted here (some sandboxes): hashing then competes with the event loop as an equal.
  }
  port.on('message', (msg) => {
    let reply;
    try {
      reply = { id: msg.id, ok: true, value: run(msg.job) };
    } catch (err) {
      reply = { id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage(reply);
  });
}
