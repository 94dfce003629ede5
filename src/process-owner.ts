/**
 * Which process owns a file it leaves behind while working (a lock, a temporary upload), and whether
 * that process is gone: a start sweeps what crashed processes left, never what a live one is writing.
 */
import { hostname } from 'node:os';

/** `pid@host` of this process. */
export function thisOwner(): string {
  return `${process.pid}@${hostname()}`;
}

/**
 * True when `owner` (a `pid@host`) was this host's process and is no longer running, or names this very
 * pid (a restarted container reuses pids, and this process has left nothing behind yet). Another host's
 * owner cannot be checked: false.
 */
export function ownerGone(owner: string): boolean {
  const at = owner.lastIndexOf('@');
  const pid = Number(owner.slice(0, at));
  if (at < 0 || owner.slice(at + 1) !== hostname()) return false;
  return pid === process.pid || !isAlive(pid);
}

export function isAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
