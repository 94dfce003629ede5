/**
 * The body of an image render process. It listens on a Unix domain socket in a folder only the service's
 * user can enter (pool.ts makes it 0700), takes one job per connection, one connection at a time, and
 * answers on the same connection with the image, the refusal, or "this belongs to the SVG lane". It holds no secret (the pool empties its environment) and opens
 * no file but the data file a job names, read-only: a path the service's fs store made from its own
 * metadata (never from a request) and that must look like one of that store's data files.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import path from 'node:path';
import { AppError } from '../../errors.ts';
import { configureSharp, NeedsSvgLane, renderImage } from './pipeline.ts';
import { type AnswerHeader, FrameReader, frame, type JobHeader } from './render-wire.ts';

const socketPath = process.argv[3];
if (!socketPath || !process.send) throw new Error('render-child is started by the image render supervisor');

/** Largest source accepted on the channel (IMAGE_MAX_SOURCE_SIZE is far below). */
const MAX_INPUT = 2 ** 31 - 1;
/** What the fs store's data files are named (`<escaped name>~<uuid>.data`); no other file is opened. */
const DATA_FILE = /^[^/\\]+~[0-9a-f-]{36}\.data$/;

/**
 * The whole data file, or undefined when it is not there or not the size its metadata gives. Read
 * synchronously: this process does one job at a time and nothing else meanwhile, and four trips through
 * the thread pool (open, stat, read, close) cost more wake-ups than the read itself on a busy machine.
 */
function readDataFile(file: { path: string; size: number }): Buffer | undefined {
  if (!path.isAbsolute(file.path) || !DATA_FILE.test(path.basename(file.path)))
    throw new Error('not a data file of the store');
  let fd: number;
  try {
    fd = openSync(file.path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size !== file.size) return undefined;
    const buf = Buffer.allocUnsafe(file.size);
    let at = 0;
    while (at < buf.length) {
      const read = readSync(fd, buf, at, buf.length - at, at);
      if (read === 0) return undefined;
      at += read;
    }
    return buf;
  } finally {
    closeSync(fd);
  }
}

async function render(job: JobHeader, bytes: Buffer): Promise<{ header: AnswerHeader; data?: Buffer }> {
  try {
    const input = job.file ? readDataFile(job.file) : bytes;
    if (!input) return { header: { kind: 'gone' } };
    const out = await renderImage(input, job.params, job.choice, job.limits);
    const { format, width, height } = out;
    return { header: { kind: 'done', length: out.data.length, format, width, height }, data: out.data };
  } catch (err) {
    if (err instanceof NeedsSvgLane) return { header: { kind: 'reroute' } };
    const e =
      err instanceof AppError
        ? err
        : new AppError('IMAGE_CORRUPT', 'The image could not be transformed.', { cause: err });
    return { header: { kind: 'failed', code: e.code, message: e.message } };
  }
}

/** Reads one job from the connection, renders it, answers, and resolves when the answer is written. */
function serve(socket: Socket): Promise<void> {
  return new Promise<void>((resolve) => {
    const reader = new FrameReader<JobHeader>(MAX_INPUT);
    let started = false;
    const done = () => {
      socket.destroy();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      let got: ReturnType<typeof reader.push>;
      try {
        got = reader.push(chunk);
      } catch {
        return done();
      }
      if (!got) return;
      socket.off('data', onData);
      started = true;
      void render(got.header, got.payload).then(({ header, data }) => {
        if (socket.destroyed) return done();
        socket.cork();
        for (const b of frame(header, data)) socket.write(b);
        socket.uncork();
        socket.end(done);
      });
    };
    socket.on('data', onData);
    socket.on('error', done);
    socket.on('close', () => {
      if (!started) resolve();
    });
  });
}

const waiting: Socket[] = [];
let busy = false;
async function next(): Promise<void> {
  if (busy) return;
  busy = true;
  for (let s = waiting.shift(); s; s = waiting.shift()) await serve(s);
  busy = false;
}

configureSharp();
const server = createServer((socket) => {
  waiting.push(socket);
  void next();
});
server.listen(socketPath, () => process.send?.({ kind: 'ready' }));
// The supervisor went away (ended, or killed): nothing is left to answer to.
process.on('disconnect', () => process.exit(0));
