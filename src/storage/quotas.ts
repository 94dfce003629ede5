/**
 * Quotas: what a user stores is the sum of the sizes of the files they own (storage.files.owner_id); it
 * may not exceed STORAGE_QUOTA_BYTES or their override (storage.quotas). Admission is decided once,
 * before any byte is written, by a reservation of the upload's declared length: concurrent uploads of
 * one user reserve one after another under a lock on that user, each seeing the files owned and every
 * live reservation, so together they can never pass the quota. The completion (files.ts completeUpload)
 * settles the reservation to the real size in the transaction that writes the row; a failure releases
 * it; a crash leaves it to run out (its lease), after which the sweeper repairs what it left.
 *
 * Why a reservations table rather than a usage counter row: a reservation has a lease, so one left by a
 * crash frees itself, and it names the key and the uploader, so the object a crash left without its row
 * is repaired with the right owner (files.ts). A counter has neither.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { type Config, parseSize } from '../config.ts';
import type { Database, Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import {
  clearQuotaOverride,
  deleteReservation,
  extendReservation,
  findFile,
  insertReservation,
  lockOwner,
  ownedFiles,
  quotaOverride,
  reservedBytes,
  setQuotaOverride,
} from './files-store.ts';

export interface QuotaDeps {
  readonly config: Config;
  readonly db: Database;
  readonly clock: Clock;
}

/**
 * An upload's reservation: plain data (JSON-safe), so that an upload that outlives a request (TUS) can
 * keep it with its own state and hand it back to `completeUpload` or `releaseQuota`.
 */
export interface QuotaReservation {
  id: string;
  /** The object key the upload will complete at. */
  key: string;
  /** The uploader; null for the admin secret or an anonymous upload (counted in no quota). */
  ownerId: string | null;
  /** Bytes held against the quota: the declared length less what the overwritten file of the owner has. */
  bytes: number;
  /** The most the upload may write: the length granted (the declared one, or less with `upTo`). */
  length: number;
  expiresAt: string;
}

export interface ReserveRequest {
  ownerId: string | null;
  key: string;
  /** The declared length (Content-Length, the multipart body's length, TUS Upload-Length). */
  bytes: number;
  /** When the reservation lapses unless extended, settled or released. */
  expiresAt: Date;
  /**
   * `bytes` is only a ceiling (a body of unknown length, limited by STORAGE_MAX_UPLOAD_SIZE): grant what
   * is free up to it rather than refuse; the upload must then stop at the granted `length`.
   */
  upTo?: boolean;
}

/** The quota of a user: their override, else STORAGE_QUOTA_BYTES; null is unlimited. */
export async function quotaOf(q: Queryable, config: Config, userId: string): Promise<number | null> {
  const override = await quotaOverride(q, userId);
  return override === undefined ? config.STORAGE_QUOTA_BYTES : override;
}

function exceeded(quota: number, used: number, reserved: number, wanted: number): AppError {
  const free = Math.max(0, quota - used - reserved);
  return new AppError(
    'QUOTA_EXCEEDED',
    `The upload needs ${wanted} bytes and ${free} of your ${quota} bytes are free${
      reserved > 0 ? ` (${reserved} held by uploads in progress)` : ''
    }.`,
  );
}

/**
 * Reserves `bytes` for an upload to `key`, or refuses with 413 QUOTA_EXCEEDED. An overwrite of a file
 * the same user owns needs only what the new version adds (the declared length less the old size).
 * Every upload gets a reservation, the admin's too (with 0 bytes): it is also the record that the upload
 * is under way (see files.ts).
 */
export async function reserveQuota(deps: QuotaDeps, req: ReserveRequest): Promise<QuotaReservation> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    let bytes = 0;
    let length = req.bytes;
    if (req.ownerId !== null) {
      await lockOwner(tx, req.ownerId);
      const quota = await quotaOf(tx, deps.config, req.ownerId);
      const old = await findFile(tx, req.key);
      const credit = old && old.ownerId === req.ownerId ? old.size : 0;
      bytes = Math.max(0, req.bytes - credit);
      if (quota !== null) {
        const owned = await ownedFiles(tx, req.ownerId);
        const reserved = await reservedBytes(tx, req.ownerId, now);
        const free = quota - owned.bytes - reserved;
        if (bytes > free) {
          if (!req.upTo || free <= 0) throw exceeded(quota, owned.bytes, reserved, bytes);
          bytes = free;
          length = Math.min(req.bytes, free + credit);
        }
      }
    }
    const id = randomUUID();
    await insertReservation(
      tx,
      { id, key: req.key, ownerId: req.ownerId, bytes, expiresAt: req.expiresAt },
      now,
    );
    return { id, key: req.key, ownerId: req.ownerId, bytes, length, expiresAt: req.expiresAt.toISOString() };
  });
}

/** Gives a reservation's bytes back (an upload that failed or was abandoned). Idempotent. */
export async function releaseQuota(deps: Pick<QuotaDeps, 'db'>, reservation: QuotaReservation) {
  await deleteReservation(deps.db, reservation.id);
}

/** Moves a reservation's lapse (an upload still in progress); false when it is gone already. */
export async function extendQuota(
  deps: Pick<QuotaDeps, 'db'>,
  reservation: QuotaReservation,
  expiresAt: Date,
): Promise<boolean> {
  reservation.expiresAt = expiresAt.toISOString();
  return extendReservation(deps.db, reservation.id, expiresAt);
}

/** `GET /storage/usage`. */
export interface Usage {
  used_bytes: number;
  /** null: unlimited. */
  quota_bytes: number | null;
  files: number;
}

export async function storageUsage(deps: Pick<QuotaDeps, 'db' | 'config'>, userId: string): Promise<Usage> {
  const owned = await ownedFiles(deps.db, userId);
  return {
    used_bytes: owned.bytes,
    quota_bytes: await quotaOf(deps.db, deps.config, userId),
    files: owned.files,
  };
}

/** An operator's override (`gatehouse users set-quota`): bytes, null for unlimited, 'default' to drop it. */
export async function setUserQuota(
  q: Queryable,
  userId: string,
  quota: number | null | 'default',
): Promise<void> {
  if (quota === 'default') await clearQuotaOverride(q, userId);
  else await setQuotaOverride(q, userId, quota);
}

/** Parses `<bytes|unlimited|default>` as the CLI takes it (sizes as in the settings: 10GiB, 500MB). */
export function parseQuota(raw: string): number | null | 'default' | undefined {
  const v = raw.trim().toLowerCase();
  if (v === 'unlimited') return null;
  if (v === 'default') return 'default';
  return parseSize(v);
}
