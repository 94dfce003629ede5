/**
 * The `fs` object store: a folder (DATA_DIR/storage by default), for one instance.
 *
 * Layout: `objects/<dir>/.../<name>~meta.json` is the object's metadata and its commit point; it names
 * the data file `<name>~<uuid>.data` beside it. A write streams into `tmp/`, is fsynced, renamed next to
 * the metadata, and only then does the metadata (written the same way) point at it; the old data file
 * is removed afterwards. A crash at any step leaves either the old object or the new one, never a mix,
 * and at worst an unreferenced file that nothing serves.
 *
 * Key segments are escaped so that any S3 key maps to a distinct path: folders and files never collide
 * (`a` and `a/b` can both be objects, as in S3), names stay within filesystem limits, and keys that
 * differ only in case stay distinct on case-insensitive filesystems.
 *
 * `head` answers from an in-memory copy of recent metadata (MetadataCache below): one instance owns the
 * folder, so its own commits are the only changes, and each commit drops the key's copy.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ByteRange, ObjectInfo, ObjectStore, PutOptions } from './object-store.ts';

const META = '~meta.json';
const MAX_NAME = 200;
/** Temporary files older than this at start belong to a crashed process. */
const STALE_TMP_MS = 60 * 60 * 1000;
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
 * (README, Storage): every change goes through this process's commits, which call `changing` before
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
    await mkdir(this.objects, { recursive: true });
    await mkdir(this.tmp, { recursive: true });
    const now = Date.now();
    for (const name of await readdir(this.tmp)) {
      const file = path.join(this.tmp, name);
      const s = await stat(file).catch(() => undefined);
      if (s && now - s.mtimeMs > STALE_TMP_MS) await rm(file, { force: true });
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
    const tmpFile = path.join(this.tmp, randomUUID());
    const md5 = createHash('md5');
    let size = 0;
    try {
      await pipeline(
        body,
        new Transform({
          transform(chunk: Buffer, _enc, cb) {
            md5.update(chunk);
            size += chunk.length;
            cb(null, chunk);
          },
        }),
        createWriteStream(tmpFile, { flags: 'wx' }),
      );
      const fh = await open(tmpFile, 'r+');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
    } catch (err) {
      await rm(tmpFile, { force: true });
      throw err;
    }
    const { dir, base } = this.location(key);
    const dataName = `${base}~${randomUUID()}.data`;
    const sidecar: Sidecar = {
      key,
      size,
      etag: `"${md5.digest('hex')}"`,
      contentType: opts.contentType,
      token: opts.token,
      lastModified: new Date().toISOString(),
      data: dataName,
    };
    try {
      await this.locked(key, async () => {
        await this.moveIn(tmpFile, dir, dataName);
        const old = await this.readSidecar(key);
        await this.writeSidecar(dir, base, sidecar);
        if (old && old.data !== dataName) await rm(path.join(dir, old.data), { force: true });
      });
    } catch (err) {
      await rm(tmpFile, { force: true });
      throw err;
    }
    return toInfo(sidecar);
  }

  /** Renames into `dir`, recreating it if a concurrent delete pruned it in between. */
  private async moveIn(from: string, dir: string, name: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await mkdir(dir, { recursive: true });
      try {
        await rename(from, path.join(dir, name));
        return;
      } catch (err) {
        if (!isMissing(err) || attempt >= 3) throw err;
      }
    }
  }

  private async writeSidecar(dir: string, base: string, s: Sidecar): Promise<void> {
    const tmpFile = path.join(this.tmp, `${randomUUID()}.json`);
    try {
      const fh = await open(tmpFile, 'wx');
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

  async get(key: string, range?: ByteRange): Promise<{ info: ObjectInfo; body: Readable } | undefined> {
    // A concurrent overwrite may remove the data file between reading the metadata and opening it.
    for (let attempt = 0; attempt < 5; attempt++) {
      const s = await this.readSidecar(key);
      if (!s) return undefined;
      const { dir } = this.location(key);
      let fh: Awaited<ReturnType<typeof open>>;
      try {
        fh = await open(path.join(dir, s.data), 'r');
      } catch (err) {
        if (isMissing(err)) continue;
        throw err;
      }
      if (s.size === 0) {
        await fh.close();
        const empty = new PassThrough();
        empty.end();
        return { info: toInfo(s), body: empty };
      }
      const body = fh.createReadStream(range ? { start: range.start, end: range.end } : {});
      return { info: toInfo(s), body };
    }
    return undefined;
  }

  async delete(key: string): Promise<boolean> {
    return this.locked(key, async () => {
      const s = await this.readSidecar(key);
      if (!s) return false;
      const { dir, base } = this.location(key);
      await unlink(path.join(dir, base + META));
      await rm(path.join(dir, s.data), { force: true });
      await this.prune(dir);
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
    for (const name of names) {
      if (name.endsWith(META)) {
        const s = await readFile(path.join(dir, name), 'utf8')
          .then((t) => JSON.parse(t) as Sidecar)
          .catch((err) => {
            if (isMissing(err)) return undefined;
            throw err;
          });
        if (s) entries.push({ sort: Buffer.from(s.key.slice(s.key.lastIndexOf('/') + 1)), file: s });
      } else if (!name.includes('~')) {
        entries.push({ sort: Buffer.from(`${decodeSegment(name) ?? name}/`), dir: path.join(dir, name) });
      }
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
  };
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** For tests and diagnostics: files currently in the temporary folder. */
export async function temporaryFiles(root: string): Promise<string[]> {
  return readdir(path.join(root, 'tmp')).catch(() => []);
}
