/**
 * DATA_DIR holds the embedded database, stored files and their metadata, generated keys and secrets, and
 * the development outbox: nothing another local user may read. Folders are created 0700 and files 0600
 * whatever the umask (explicit modes where the service creates them; `main` sets the umask to 077 for
 * what libraries create, PGlite's files among them), and at start anything already there that group or
 * others can reach is tightened, with a warning naming how many and a few of them.
 */
import { chmodSync, type Dirent, lstatSync, readdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';

/** Folders of DATA_DIR: the owner only. */
export const DIR_MODE = 0o700;
/** Files of DATA_DIR: read and written by the owner only. */
export const FILE_MODE = 0o600;
/** The umask `main` sets: whatever a library creates is its owner's only. */
export const PROCESS_UMASK = 0o077;

export interface Tightened {
  /** Paths (relative to DATA_DIR) whose modes were tightened, with their former mode. */
  changed: { path: string; mode: string }[];
  /** Paths whose mode could not be changed (owned by another user, read-only file system). */
  failed: { path: string; error: string }[];
}

/**
 * Places a folder must never be tightened as a whole, even if DATA_DIR names them by mistake: the file
 * system root, the home folder, the temporary folder and the working folder hold other programs' files.
 */
function sharedPlace(dir: string): boolean {
  const shared = [path.parse(dir).root, homedir(), tmpdir(), process.cwd()].map((p) => path.resolve(p));
  return shared.includes(dir);
}

/**
 * Removes group and other permissions from DATA_DIR and everything under it (symbolic links are neither
 * followed nor changed). Returns what changed; a missing DATA_DIR is left for its first writer to create.
 */
export function tightenDataDir(dataDir: string): Tightened {
  const root = path.resolve(dataDir);
  const out: Tightened = { changed: [], failed: [] };
  if (sharedPlace(root)) return out;
  const fix = (file: string, isDir: boolean) => {
    let mode: number;
    try {
      mode = lstatSync(file).mode & 0o7777;
    } catch {
      return; // gone meanwhile
    }
    if ((mode & 0o077) === 0) return;
    try {
      chmodSync(file, isDir ? DIR_MODE : mode & 0o700);
      out.changed.push({ path: path.relative(root, file) || '.', mode: mode.toString(8).padStart(4, '0') });
    } catch (err) {
      out.failed.push({
        path: path.relative(root, file) || '.',
        error: (err as NodeJS.ErrnoException).code ?? String(err),
      });
    }
  };
  let top: ReturnType<typeof lstatSync>;
  try {
    top = lstatSync(root);
  } catch {
    return out;
  }
  if (!top.isDirectory()) return out;
  fix(root, true);
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      const file = path.join(dir, e.name);
      if (e.isSymbolicLink()) continue;
      if (e.isDirectory()) {
        fix(file, true);
        stack.push(file);
      } else if (e.isFile()) fix(file, false);
    }
  }
  return out;
}

/** tightenDataDir, with a warning when anything was readable by others (or could not be changed). */
export function secureDataDir(dataDir: string, log: FastifyBaseLogger): void {
  if (sharedPlace(path.resolve(dataDir))) {
    log.warn(
      { dataDir },
      'DATA_DIR is a folder other programs use (the root, home, temporary or working folder); its modes are left alone: give Gatehouse a folder of its own',
    );
    return;
  }
  const { changed, failed } = tightenDataDir(dataDir);
  if (changed.length > 0)
    log.warn(
      { dataDir, tightened: changed.length, examples: changed.slice(0, 5) },
      `${changed.length} files or folders in DATA_DIR were readable by other users; they are now the owner's only (folders 0700, files 0600)`,
    );
  if (failed.length > 0)
    log.warn(
      { dataDir, failed: failed.length, examples: failed.slice(0, 5) },
      `${failed.length} files or folders in DATA_DIR are readable by other users and their modes could not be changed; fix them by hand`,
    );
}
