/**
 * The thread behind StreamMd5 (md5.ts): one MD5 per job; each block is hashed, then handed back so the
 * main thread can reuse it. Plain JavaScript so that the same file runs under tsx and from dist/ (a
 * worker thread does not inherit tsx's loader on Node 20); the messages are typed in md5.ts.
 */
import { createHash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';

const port = parentPort;
if (!port) throw new Error('md5-worker.mjs runs as a worker thread');
/** @type {Map<number, import('node:crypto').Hash>} */
const jobs = new Map();

port.on('message', (m) => {
  if (m.kind === 'drop') {
    jobs.delete(m.id);
    return;
  }
  let hash = jobs.get(m.id);
  if (!hash) {
    hash = createHash('md5');
    jobs.set(m.id, hash);
  }
  if (m.kind === 'data') {
    hash.update(new Uint8Array(m.block, 0, m.length));
    port.postMessage({ kind: 'done', id: m.id, block: m.block }, [m.block]);
    return;
  }
  jobs.delete(m.id);
  port.postMessage({ kind: 'digest', id: m.id, hex: hash.digest('hex') });
});
