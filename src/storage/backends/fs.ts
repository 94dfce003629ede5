/**
 * The `fs` object store: a folder (DATA_DIR/storage by default), for one instance.
 *
 * Layout: `objects/<dir>/.../<name>~meta.json` is the object's metadata and its commit point; it names
 * the data file `<name>~<uuid>.data` beside it. A write streams into `tmp/`, is fsynced, renamed next to
 * the metadata, and only then does the metadata (written the same way) point at it; the old data file
 * is removed afterwards. A crash at any step leaves either the old object or the new one, never a mix.
 *
 * What a crash leaves behind is swept at the next start (`init`): temporary files are named after their
 * owner (`pid@host~…`), and those of a process that is gone (or older than an hour, for another host's)
 * are removed; a commit in progress is marked by `tmp/<owner>~<uuid>.pending` naming its key, and a
 * stale marker's key gets its data files that the metadata does not name (a new one moved in before its
 * metadata, an old one not yet removed) deleted.
 *
 * Key segments are escaped so that any S3 key maps to a distinct path: folders and files never collide
 * (`a` and `a/b` can both be objects, as in S3), names stay within filesystem limits, and keys that
 * differ only in case stay distinct on case-insensitive filesystems.
 *
 * `head` answers from an in-memory copy of recent metadata (MetadataCache below): one instance owns the
 * folder, so its own commits are the only changes, and each commit drops the key's copy.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DIR_MODE, FILE_MODE } from '../../data-dir.ts';
import { ownerGone, thisOwner } from '../../process-owner.ts';
import { StreamMd5 } from './md5.ts';
import {
  type ByteRange,
  ObjectChanged,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from './object-store.ts';

const META = '~meta.json';
const MAX_NAME = 200;
/** Temporary files older than this at start belong to a crashed process. */
const STALE_TMP_MS = 60 * 60 * 1000;
/**
 * Bytes per read of a file being sent, and the write buffer of an upload. Larger than Node's 64 KiB
 * default: a 200 MB download then takes a few hundred reads and socket writes instead of thousands
 * (docs/performance.md); a file smaller than this is read in one read of its exact size.
 */
const STREAM_CHUNK = 1024 * 1024;
/** Bytes of an upload between early flushes to the disk (see put). */
const EARLY_SYNC = 32 * 1024 * 1024;
/** Metadata files a listing reads at once. */
const LIST_READS = 16;
/** What a data file's name looks like (`<escaped name>~<uuid>.data`); anything else is never opened. */
const DATA_NAME = /^[^/\\]+~[0-9a-f-]{36}\.data$/;
const DATA_SUFFIX = /^[0-9a-f-]{36}\.data$/;
const PENDING = '.pending';
/** Metadata copies kept for `head`, and how long one is trusted without going back to the disk. */
const META_CACHE_ENTRIES = 10_000;
const META_CACHE_TTL_MS = 2_000;

interface Sidecar {
  key: string;
  size: number;
  etag: string;
  contentType: string;
  token: string;
  lastModified: string;
  data: string;
}

/** Escapes one key segment into a file name made of `[a-z0-9._-]`, `^` (upper case) and `%XX`. */
export function encodeSegment(segment: string): string {
  const enc = encodeURIComponent(segment)
    .replace(/[!'()*~^]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/[A-Z]/g, (c, i: number, s: string) => (s[i - 1] === '%' || s[i - 2] === '%' ? c : `^${c}`));
  return enc.length > MAX_NAME ? `#${createHash('sha256').update(segment).digest('hex')}` : enc;
}

export function decodeSegment(name: string): string | undefined {
  if (name.startsWith('#')) return undefined;
  return decodeURIComponent(name.replace(/\^([A-Z])/g, '$1'));
}

/**
 * Recently read metadata, by key, for `head` (a metadata request would otherwise cost four thread-pool
 * round trips: open, fstat, read, close). Correct because the fs backend has one instance per folder
 * (docs/storage.md): every change goes through this process's commits, which call `changing` before
 * and after touching a key. A copy is stored only when no commit ran while it was being read, so a read
 * that raced a commit can never put back the version the commit replaced. Copies also expire after
 * META_CACHE_TTL_MS, which bounds how long a change made behind the service's back (a restored backup,
 * a file removed by hand) goes unseen.
 */
export class MetadataCache {
  private readonly entries = new Map<string, { info: ObjectInfo; expires: number }>();
  /** Counts commits started and finished, so a read can tell whether one overlapped it. */
  private commits = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly ttlMs: number,
  ) {}

  /** A copy of the cached metadata (callers may change what they get). */
  get(key: string): ObjectInfo | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return { ...e.info, lastModified: new Date(e.info.lastModified.getTime()) };
  }

  /** A token for `store`: the commit count when a disk read starts. */
  readStarted(): number {
    return this.commits;
  }

  store(key: string, info: ObjectInfo, startedAt: number): void {
    if (startedAt !== this.commits) return;
    if (this.entries.size >= this.maxEntries) {
      // Oldest first: Map iterates in insertion order.
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, {
      info: { ...info, lastModified: new Date(info.lastModified.getTime()) },
      expires: Date.now() + this.ttlMs,
    });
  }

  /** Drops the key's copy: a reader found it stale (changed behind the service's back). */
  forget(key: string): void {
    this.entries.delete(key);
  }

  /** Runs a commit on `key`: its copy is dropped, and reads overlapping the commit are not stored. */
  async changing<T>(key: string, fn: () => Promise<T>): Promise<T> {
    this.commits++;
    this.entries.delete(key);
    try {
      return await fn();
    } finally {
      this.commits++;
      this.entries.delete(key);
    }
  }
}

export class FsObjectStore implements ObjectStore {
  readonly kind = 'fs' as const;
  private readonly objects: string;
  private readonly tmp: string;
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly meta: MetadataCache;
  /** Names this process in its temporary files (see `sweep`). */
  private readonly owner = thisOwner();

  constructor(
    readonly root: string,
    opts: { metadataCacheEntries?: number; metadataCacheTtlMs?: number } = {},
  ) {
    this.objects = path.join(root, 'objects');
    this.tmp = path.join(root, 'tmp');
    this.meta = new MetadataCache(
      opts.metadataCacheEntries ?? META_CACHE_ENTRIES,
      opts.metadataCacheTtlMs ?? META_CACHE_TTL_MS,
    );
  }

  async init(): Promise<void> {
    await mkdir(this.objects, { recursive: true, mode: DIR_MODE });
    await mkdir(this.tmp, { recursive: true, mode: DIR_MODE });
    await this.sweep();
  }

  /** Removes what crashed processes left in `tmp/`, and finishes their interrupted commits. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    const names = await readdir(this.tmp);
    // Markers last: the data files they may point at are in place already, temporary ones are not.
    names.sort((a, b) => Number(a.endsWith(PENDING)) - Number(b.endsWith(PENDING)));
    for (const name of names) {
      const file = path.join(this.tmp, name);
      const s = await stat(file).catch(() => undefined);
      if (!s) continue;
      const owner = name.includes('~') ? name.slice(0, name.indexOf('~')) : '';
      if (!(ownerGone(owner) || now - s.mtimeMs > STALE_TMP_MS)) continue;
      if (name.endsWith(PENDING)) {
        const marked = await readFile(file, 'utf8').catch(() => '');
        const key = (JSON.parse(marked || '{}') as { key?: unknown }).key;
        if (typeof key === 'string') await this.reconcile(key);
      }
      await rm(file, { force: true });
    }
  }

  /** Deletes the key's data files that its metadata does not name (after a crash mid-commit). */
  private async reconcile(key: string): Promise<void> {
    await this.locked(key, async () => {
      const { dir, base } = this.location(key);
      const current = (await this.readSidecar(key))?.data;
      const entries = await readdir(dir).catch(() => [] as string[]);
      for (const e of entries) {
        if (e !== current && e.startsWith(`${base}~`) && DATA_SUFFIX.test(e.slice(base.length + 1)))
          await rm(path.join(dir, e), { force: true });
      }
      if (!current) await this.prune(dir);
    });
  }

  /**
   * Runs a commit on `key` with a marker in `tmp/` naming it, so that a crash in the middle is finished
   * by the next start's sweep. Not fsynced: it guards against a killed process, whose writes the kernel
   * keeps; a power loss may lose the marker and leave an unreferenced data file, never a wrong object.
   */
  private async marked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const marker = path.join(this.tmp, `${this.owner}~${randomUUID()}${PENDING}`);
    await writeFile(marker, JSON.stringify({ key }), { flag: 'wx', mode: FILE_MODE });
    try {
      return await fn();
    } finally {
      await rm(marker, { force: true });
    }
  }

  private location(key: string): { dir: string; base: string } {
    const segments = key.split('/');
    const last = segments.pop() as string;
    return { dir: path.join(this.objects, ...segments.map(encodeSegment)), base: encodeSegment(last) };
  }

  /**
   * Runs `fn` after any other commit on the same key (reads never wait). Every change to the folder runs
   * here, which is what keeps the metadata cache exact.
   */
  private async locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(key) ?? Promise.resolve();
    const commit = () => this.meta.changing(key, fn);
    const run = prev.then(commit, commit);
    const tail = run.catch(() => {});
    this.locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    }
  }

  private async readSidecar(key: string): Promise<Sidecar | undefined> {
    const { dir, base } = this.location(key);
    try {
      return JSON.parse(await readFile(path.join(dir, base + META), 'utf8')) as Sidecar;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const cached = this.meta.get(key);
    if (cached) return cached;
    const started = this.meta.readStarted();
    const s = await this.readSidecar(key);
    if (!s) return undefined;
    const info = toInfo(s);
    this.meta.store(key, info, started);
    return info;
  }

  async put(key: string, body: Readable, opts: PutOptions): Promise<ObjectInfo> {
    const tmpFile = path.join(this.tmp, `${this.owner}~${randomUUID()}`);
    const md5 = new StreamMd5();
    let size = 0;
    let etag: string;
    const fh = await open(tmpFile, 'wx', FILE_MODE);
    // Early flushes: every EARLY_SYNC bytes, one fdatasync runs while the body keeps arriving, so the disk
    // writes overlap the upload instead of all waiting for the final fsync. They only add flushes: the
    // final fsync still runs, and completes, before the rename. A failed early flush fails the upload
    // (after a failed fsync, Linux may report the next one clean although data was lost).
    let flushed = 0;
    let flushing: Promise<void> | undefined;
    let flushError: unknown;
    const flushEarly = () => {
      flushed = size;
      flushing = fh.datasync().then(
        () => {
          flushing = undefined;
        },
        (err: unknown) => {
          flushError ??= err;
          flushing = undefined;
        },
      );
    };
    try {
      await pipeline(
        body,
        new Transform({
          highWaterMark: STREAM_CHUNK,
          transform(chunk: Buffer, _enc, cb) {
            size += chunk.length;
            if (size - flushed >= EARLY_SYNC && !flushing) flushEarly();
            const wait = md5.update(chunk);
            if (wait !== undefined) wait.then(() => cb(null, chunk), cb);
            else cb(null, chunk);
          },
        }),
        fileSink(fh),
      );
      await flushing;
      if (flushError) throw flushError;
      // Durability: the bytes are on disk before anything can point at them (then rename, then metadata).
      const [hex] = await Promise.all([md5.digest(), fh.sync()]);
      etag = `"${hex}"`;
    } catch (err) {
      md5.dispose();
      await flushing;
      await fh.close().catch(() => {});
      await rm(tmpFile, { force: true });
      throw err;
    }
    await fh.close();
    try {
      return await this.commitData(key, tmpFile, size, etag, opts);
    } catch (err) {
      await rm(tmpFile, { force: true });
      throw err;
    }
  }

  /**
   * Makes the file at `file` (written and fsynced by its owner, on the same filesystem, never changed
   * again) the object `key`, by renaming it into place: a resumable upload's bytes become the object
   * without being copied. Its MD5 (the ETag) is the owner's, or read back from it. The file is gone once
   * this resolves.
   */
  async adopt(key: string, file: string, opts: PutOptions, knownMd5?: string): Promise<ObjectInfo> {
    if (knownMd5 !== undefined) {
      if (!/^[0-9a-f]{32}$/.test(knownMd5)) throw new Error('adopt: not an MD5 digest');
      const { size } = await stat(file);
      return this.commitData(key, file, size, `"${knownMd5}"`, opts);
    }
    const md5 = new StreamMd5();
    let size = 0;
    let etag: string;
    try {
      const fh = await open(file, 'r');
      try {
        for await (const chunk of fh.createReadStream({ highWaterMark: STREAM_CHUNK, autoClose: false })) {
          size += (chunk as Buffer).length;
          const wait = md5.update(chunk as Buffer);
          if (wait !== undefined) await wait;
        }
      } finally {
        await fh.close();
      }
      etag = `"${await md5.digest()}"`;
    } catch (err) {
      md5.dispose();
      throw err;
    }
    return this.commitData(key, file, size, etag, opts);
  }

  /** Moves a complete, fsynced data file in as `key`'s new version, then points the metadata at it. */
  private async commitData(
    key: string,
    tmpFile: string,
    size: number,
    etag: string,
    opts: PutOptions,
  ): Promise<ObjectInfo> {
    const { dir, base } = this.location(key);
    const dataName = `${base}~${randomUUID()}.data`;
    const sidecar: Sidecar = {
      key,
      size,
      etag,
      contentType: opts.contentType,
      token: opts.token,
      lastModified: new Date().toISOString(),
      data: dataName,
    };
    await this.locked(key, () =>
      this.marked(key, async () => {
        await this.moveIn(tmpFile, dir, dataName);
        const old = await this.readSidecar(key);
        await this.writeSidecar(dir, base, sidecar);
        if (old && old.data !== dataName) await rm(path.join(dir, old.data), { force: true });
      }),
    );
    return toInfo(sidecar);
  }

  /** Renames into `dir`, recreating it if a concurrent delete pruned it in between. */
  private async moveIn(from: string, dir: string, name: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await mkdir(dir, { recursive: true, mode: DIR_MODE });
      try {
        await rename(from, path.join(dir, name));
        return;
      } catch (err) {
        if (!isMissing(err) || attempt >= 3) throw err;
      }
    }
  }

  private async writeSidecar(dir: string, base: string, s: Sidecar): Promise<void> {
    const tmpFile = path.join(this.tmp, `${this.owner}~${randomUUID()}.json`);
    try {
      const fh = await open(tmpFile, 'wx', FILE_MODE);
      try {
        await fh.writeFile(JSON.stringify(s));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await this.moveIn(tmpFile, dir, base + META);
    } finally {
      await rm(tmpFile, { force: true });
    }
  }

  async get(
    key: string,
    range?: ByteRange,
    expect?: ObjectInfo,
  ): Promise<{ info: ObjectInfo; body: Readable } | undefined> {
    const { dir } = this.location(key);
    // A known version (the caller's, else the metadata cache's) is its data file: never rewritten, only
    // replaced and removed. Open it directly; gone means the object changed since it was read (a cached
    // copy can only be stale after a change behind the service's back: drop it and read the disk).
    const known = expect ?? this.meta.get(key);
    if (known?.version && DATA_NAME.test(known.version)) {
      const fh = await openIfPresent(path.join(dir, known.version));
      if (fh) return { info: known, body: await readBody(fh, known.size, range) };
      this.meta.forget(key);
      if (expect) throw new ObjectChanged(`${key} changed since its metadata was read`);
    }
    // A concurrent overwrite may remove the data file between reading the metadata and opening it.
    for (let attempt = 0; attempt < 5; attempt++) {
      const s = await this.readSidecar(key);
      if (
        expect &&
        !(s && s.etag === expect.etag && Date.parse(s.lastModified) === expect.lastModified.getTime())
      )
        throw new ObjectChanged(`${key} changed since its metadata was read`);
      if (!s) return undefined;
      const fh = await openIfPresent(path.join(dir, s.data));
      if (!fh) continue;
      return { info: toInfo(s), body: await readBody(fh, s.size, range) };
    }
    if (expect) throw new ObjectChanged(`${key} kept changing while being opened`);
    return undefined;
  }

  async read(key: string, expect: ObjectInfo): Promise<Buffer> {
    if (!expect.version || !DATA_NAME.test(expect.version)) {
      const got = await this.get(key, undefined, expect);
      if (!got) throw new ObjectChanged(`${key} changed since its metadata was read`);
      return collect(got.body);
    }
    // Open, one read of the known size, close: no stream for a file read whole.
    const fh = await openIfPresent(path.join(this.location(key).dir, expect.version));
    if (!fh) {
      this.meta.forget(key);
      throw new ObjectChanged(`${key} changed since its metadata was read`);
    }
    try {
      const buf = Buffer.allocUnsafe(expect.size);
      let at = 0;
      while (at < buf.length) {
        const { bytesRead } = await fh.read(buf, at, buf.length - at, at);
        if (bytesRead === 0) throw new Error(`${key}: its data file is shorter than its metadata says`);
        at += bytesRead;
      }
      return buf;
    } finally {
      await fh.close();
    }
  }

  dataFile(key: string, expect: ObjectInfo): string | undefined {
    // The version names a data file beside the metadata (never rewritten in place); nothing else is given.
    if (!expect.version || !DATA_NAME.test(expect.version)) return undefined;
    return path.join(this.location(key).dir, expect.version);
  }

  async delete(key: string): Promise<boolean> {
    return this.locked(key, async () => {
      const s = await this.readSidecar(key);
      if (!s) return false;
      const { dir, base } = this.location(key);
      await this.marked(key, async () => {
        await unlink(path.join(dir, base + META));
        await rm(path.join(dir, s.data), { force: true });
        await this.prune(dir);
      });
      return true;
    });
  }

  /** Removes now-empty folders up to the root, as S3 has no folders to leave behind. */
  private async prune(dir: string): Promise<void> {
    let d = dir;
    while (d.startsWith(this.objects + path.sep)) {
      try {
        await rmdir(d);
      } catch {
        return;
      }
      d = path.dirname(d);
    }
  }

  async setToken(key: string, token: string): Promise<ObjectInfo | undefined> {
    return this.locked(key, async () => {
      const s = await this.readSidecar(key);
      if (!s) return undefined;
      const { dir, base } = this.location(key);
      const next = { ...s, token, lastModified: new Date().toISOString() };
      await this.writeSidecar(dir, base, next);
      return toInfo(next);
    });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    // Start in the deepest folder the prefix names completely; filter the rest by key.
    const slash = prefix.lastIndexOf('/');
    const folder = slash < 0 ? '' : prefix.slice(0, slash);
    const start =
      folder === '' ? this.objects : path.join(this.objects, ...folder.split('/').map(encodeSegment));
    for await (const info of this.walk(start)) {
      if (info.key.startsWith(prefix)) yield info;
    }
  }

  private async *walk(dir: string): AsyncIterable<ObjectInfo> {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    const entries: { sort: Buffer; file?: Sidecar; dir?: string }[] = [];
    const metas = names.filter((n) => n.endsWith(META));
    // The metadata files are read LIST_READS at a time: one by one, a folder of 1,000 files took 1,000
    // sequential round trips through the thread pool before the first byte of a zip.
    for (let i = 0; i < metas.length; i += LIST_READS) {
      const read = await Promise.all(
        metas.slice(i, i + LIST_READS).map((name) =>
          readFile(path.join(dir, name), 'utf8')
            .then((t) => JSON.parse(t) as Sidecar)
            .catch((err) => {
              if (isMissing(err)) return undefined;
              throw err;
            }),
        ),
      );
      for (const s of read)
        if (s) entries.push({ sort: Buffer.from(s.key.slice(s.key.lastIndexOf('/') + 1)), file: s });
    }
    for (const name of names) {
      if (!name.endsWith(META) && !name.includes('~'))
        entries.push({ sort: Buffer.from(`${decodeSegment(name) ?? name}/`), dir: path.join(dir, name) });
    }
    // S3 lists keys in UTF-8 byte order; sorting each folder's names (folders with their slash) keeps it.
    entries.sort((a, b) => Buffer.compare(a.sort, b.sort));
    for (const e of entries) {
      if (e.file) yield toInfo(e.file);
      else if (e.dir) yield* this.walk(e.dir);
    }
  }

  async ping(): Promise<void> {
    await stat(this.objects);
  }

  async close(): Promise<void> {
    await Promise.all(this.locks.values());
  }
}

function toInfo(s: Sidecar): ObjectInfo {
  return {
    key: s.key,
    size: s.size,
    lastModified: new Date(s.lastModified),
    etag: s.etag,
    contentType: s.contentType,
    token: s.token,
    version: s.data,
  };
}

type FileHandle = Awaited<ReturnType<typeof open>>;

/**
 * Writes a stream into an open file, from its start. The handle stays the caller's (to flush and close);
 * its close waits for a write still in flight. A deep buffer keeps the body flowing while a write is in
 * the thread pool, and what gathers meanwhile goes out in one writev.
 */
function fileSink(fh: FileHandle): Writable {
  let position = 0;
  const writeAll = async (buffers: Buffer[]) => {
    let rest = buffers;
    while (rest.length > 0) {
      const { bytesWritten } = await fh.writev(rest, position);
      position += bytesWritten;
      let skip = bytesWritten;
      while (rest.length > 0 && skip >= (rest[0] as Buffer).length) {
        skip -= (rest[0] as Buffer).length;
        rest = rest.slice(1);
      }
      if (skip > 0) rest = [(rest[0] as Buffer).subarray(skip), ...rest.slice(1)];
    }
  };
  return new Writable({
    highWaterMark: STREAM_CHUNK,
    write(chunk: Buffer, _enc, cb) {
      writeAll([chunk]).then(() => cb(), cb);
    },
    writev(chunks, cb) {
      writeAll(chunks.map((c) => c.chunk as Buffer)).then(() => cb(), cb);
    },
  });
}

async function collect(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function openIfPresent(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, 'r');
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

/**
 * The bytes of an opened data file of `size` bytes (all, or one range). The end is always given, so the
 * stream reads exactly the bytes it needs: a small file in one read of its own size, with no extra read
 * to find the end and no 64 KiB buffer per read.
 */
async function readBody(fh: FileHandle, size: number, range?: ByteRange): Promise<Readable> {
  const start = range?.start ?? 0;
  const end = range?.end ?? size - 1;
  if (end < start) {
    await fh.close();
    const empty = new PassThrough();
    empty.end();
    return empty;
  }
  return fh.createReadStream({ start, end, highWaterMark: Math.min(end - start + 1, STREAM_CHUNK) });
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** For tests and diagnostics: files currently in the temporary folder. */
export async function temporaryFiles(root: string): Promise<string[]> {
  return readdir(path.join(root, 'tmp')).catch(() => []);
}
