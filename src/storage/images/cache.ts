/**
 * A bounded, least-recently-used cache of transformed images on the local disk (IMAGE_CACHE_DIR).
 *
 * Why local and not the object store: variants are disposable, so they need no replication, no rules,
 * and no reserved prefix that listings, zips and key validation would all have to hide; the cache can
 * never leak into a listing because it is not in the store. Each instance warms its own cache; the
 * variant ETag does not depend on the cache, so 304s work on a cold instance too.
 *
 * Layout: `<dir>/<hh>/<sha256(source key)>/<source tag>-<variant id>.<format>`. Variants are keyed by
 * the source ETag, so an overwritten source never serves an old variant; writing a new one removes the
 * siblings rendered from the old ETag, and `dropSource` removes them all when the source is deleted.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface CachedVariant {
  data: Buffer;
  format: string;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export class VariantCache {
  /** Path → size, in recency order (oldest first). */
  private readonly entries = new Map<string, number>();
  /** `<source folder>/<source tag>-<variant id>.` → path, so a hit costs one read and no directory scan. */
  private readonly index = new Map<string, string>();
  private total = 0;
  private loaded: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    readonly maxBytes: number,
  ) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  /** Bytes held now. */
  get size(): number {
    return this.total;
  }

  private sourceDir(sourceKey: string): string {
    const h = sha256(sourceKey);
    return path.join(this.dir, h.slice(0, 2), h);
  }

  private static prefix(sourceEtag: string, variantId: string): string {
    return `${sha256(sourceEtag).slice(0, 16)}-${variantId}.`;
  }

  /**
   * Reads what an earlier run left, oldest written first: after a restart eviction follows write
   * order until hits reorder it (hits are not written back to disk, to keep them one read each).
   */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      const found: { file: string; size: number; mtime: number }[] = [];
      const top = await readdir(this.dir).catch(() => [] as string[]);
      for (const hh of top) {
        if (hh === 'tmp') continue;
        for (const source of await readdir(path.join(this.dir, hh)).catch(() => [] as string[])) {
          const folder = path.join(this.dir, hh, source);
          for (const name of await readdir(folder).catch(() => [] as string[])) {
            const file = path.join(folder, name);
            const st = await stat(file).catch(() => undefined);
            if (st?.isFile()) found.push({ file, size: st.size, mtime: st.mtimeMs });
          }
        }
      }
      found.sort((a, b) => a.mtime - b.mtime);
      for (const f of found) this.track(f.file, f.size);
      await rm(path.join(this.dir, 'tmp'), { recursive: true, force: true });
      await this.evict();
    })();
    return this.loaded;
  }

  private static indexKey(file: string): string {
    return file.slice(0, file.lastIndexOf('.') + 1);
  }

  private track(file: string, size: number): void {
    const old = this.entries.get(file);
    if (old !== undefined) {
      this.total -= old;
      this.entries.delete(file);
    }
    this.entries.set(file, size);
    this.index.set(VariantCache.indexKey(file), file);
    this.total += size;
  }

  private untrack(file: string): void {
    const size = this.entries.get(file);
    if (size === undefined) return;
    this.total -= size;
    this.entries.delete(file);
    const key = VariantCache.indexKey(file);
    if (this.index.get(key) === file) this.index.delete(key);
  }

  async get(sourceKey: string, sourceEtag: string, variantId: string): Promise<CachedVariant | undefined> {
    if (!this.enabled) return undefined;
    await this.load();
    const prefix = path.join(this.sourceDir(sourceKey), VariantCache.prefix(sourceEtag, variantId));
    const file = this.index.get(prefix);
    if (!file) return undefined;
    const data = await readFile(file).catch(() => undefined);
    if (!data) {
      this.untrack(file);
      return undefined;
    }
    this.track(file, data.length);
    return { data, format: file.slice(prefix.length) };
  }

  async put(sourceKey: string, sourceEtag: string, variantId: string, variant: CachedVariant): Promise<void> {
    if (!this.enabled || variant.data.length > this.maxBytes) return;
    await this.load();
    const folder = this.sourceDir(sourceKey);
    const prefix = VariantCache.prefix(sourceEtag, variantId);
    const file = path.join(folder, `${prefix}${variant.format}`);
    const tmpDir = path.join(this.dir, 'tmp');
    await mkdir(folder, { recursive: true });
    await mkdir(tmpDir, { recursive: true });
    // Written aside and renamed in, so a reader never sees half a file.
    const tmp = path.join(tmpDir, randomBytes(12).toString('hex'));
    await writeFile(tmp, variant.data);
    await rename(tmp, file);
    this.track(file, variant.data.length);
    // Variants of an earlier version of this source can never be served again.
    const tag = prefix.slice(0, 16);
    for (const name of await readdir(folder).catch(() => [] as string[])) {
      if (!name.startsWith(tag)) await this.remove(path.join(folder, name));
    }
    await this.evict();
  }

  /** Removes every variant of a source (deleted or overwritten). */
  async dropSource(sourceKey: string): Promise<void> {
    if (!this.enabled) return;
    await this.load();
    const folder = this.sourceDir(sourceKey);
    for (const name of await readdir(folder).catch(() => [] as string[])) {
      await this.remove(path.join(folder, name));
    }
    await rm(folder, { recursive: true, force: true });
  }

  private async remove(file: string): Promise<void> {
    this.untrack(file);
    await rm(file, { force: true });
  }

  /** Drops the least recently used variants until the cache is back under 90 % of its size. */
  private async evict(): Promise<void> {
    if (this.total <= this.maxBytes) return;
    const target = this.maxBytes * 0.9;
    for (const file of this.entries.keys()) {
      if (this.total <= target) break;
      await this.remove(file);
    }
  }
}
