/**
 * SQL of the files table and of what hangs off it: `storage.files` (one row per stored object),
 * `storage.upload_reservations` (uploads in progress: quota held and intent to write), `storage.quotas`
 * (per-account overrides) and `storage.imports` (stores whose objects were imported). Named,
 * parameterised queries only; the decisions are in files.ts and quotas.ts.
 */
import type { Queryable } from '../db/database.ts';
import type { ObjectInfo } from './backends/object-store.ts';

/** A storage.files row as the service reads it. */
export interface FileRow {
  key: string;
  size: number;
  contentType: string;
  etag: string;
  token: string;
  ownerId: string | null;
  updatedAt: Date;
}

interface RawFileRow {
  key: string;
  size: number;
  content_type: string;
  etag: string;
  token: string;
  owner_id: string | null;
  updated_at: Date;
}

// bigint as float8: a JavaScript number on both drivers (sizes stay far below 2^53).
const FILE_COLUMNS = 'key, size::float8 AS size, content_type, etag, token, owner_id, updated_at';

function fileRow(r: RawFileRow): FileRow {
  return {
    key: r.key,
    size: Number(r.size),
    contentType: r.content_type,
    etag: r.etag,
    token: r.token,
    ownerId: r.owner_id,
    updatedAt: new Date(r.updated_at),
  };
}

/** The object description a row stands for (no store version: reads then check ETag and date). */
export function rowInfo(row: FileRow): ObjectInfo {
  return {
    key: row.key,
    size: row.size,
    lastModified: row.updatedAt,
    etag: row.etag,
    contentType: row.contentType,
    token: row.token,
  };
}

export async function findFile(q: Queryable, key: string, opts: { lock?: boolean } = {}) {
  const { rows } = await q.query<RawFileRow>(
    opts.lock ? 'storage-file-by-key-for-update' : 'storage-file-by-key',
    `SELECT ${FILE_COLUMNS} FROM storage.files WHERE key = $1${opts.lock ? ' FOR UPDATE' : ''}`,
    [key],
  );
  return rows[0] ? fileRow(rows[0]) : undefined;
}

/** `LIKE` pattern of the keys under `prefix` (its wildcards escaped). */
function prefixPattern(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * One page of the files under `prefix`, in byte order, after the key `after` (keyset pagination: each
 * page is one range scan of the unique index on `key COLLATE "C"`).
 */
export async function filesUnder(
  q: Queryable,
  prefix: string,
  after: string,
  limit: number,
): Promise<FileRow[]> {
  // One JSON value per page rather than a row per file: decoding 1,000 rows of 7 columns each (more so
  // in PGlite) took three times as long as parsing the same page as one JSON text.
  const { rows } = await q.query<{ page: string }>(
    'storage-files-under-prefix',
    `SELECT coalesce(json_agg(json_build_array(key, size, content_type, etag, token, owner_id,
              floor(extract(epoch FROM updated_at) * 1000)) ORDER BY key), '[]')::text AS page
       FROM (SELECT * FROM storage.files WHERE key LIKE $1 AND key > $2 ORDER BY key LIMIT $3) f`,
    [prefixPattern(prefix), after, limit],
  );
  const page = JSON.parse(rows[0]?.page ?? '[]') as [
    string,
    number,
    string,
    string,
    string,
    string | null,
    number,
  ][];
  return page.map(([key, size, contentType, etag, token, ownerId, ms]) => ({
    key,
    size: Number(size),
    contentType,
    etag,
    token,
    ownerId,
    updatedAt: new Date(ms),
  }));
}

/** The rows among `keys` (reconciliation compares a page of the store's listing with them). */
export async function filesByKeys(q: Queryable, keys: readonly string[]): Promise<Map<string, FileRow>> {
  const { rows } = await q.query<RawFileRow>(
    'storage-files-by-keys',
    `SELECT ${FILE_COLUMNS} FROM storage.files WHERE key = ANY($1::text[])`,
    [keys],
  );
  return new Map(rows.map((r) => [r.key, fileRow(r)]));
}

/**
 * Writes the row of `info` (insert, or update of the key's row). The owner is kept only when it names a
 * user that exists (a token may outlive its user row); otherwise the file is owned by no one.
 */
export async function upsertFile(
  q: Queryable,
  info: ObjectInfo,
  ownerId: string | null,
  now: Date,
): Promise<void> {
  await q.query(
    'storage-file-upsert',
    `INSERT INTO storage.files (key, size, content_type, etag, token, owner_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, (SELECT id FROM public.users WHERE id = $6::uuid), $7, $8)
     ON CONFLICT (key) DO UPDATE SET size = EXCLUDED.size, content_type = EXCLUDED.content_type,
       etag = EXCLUDED.etag, token = EXCLUDED.token, owner_id = EXCLUDED.owner_id,
       updated_at = EXCLUDED.updated_at`,
    [info.key, info.size, info.contentType, info.etag, info.token, ownerId, now, info.lastModified],
  );
}

/** The row of an object whose bytes or token changed in place (token rotation): owner kept. */
export async function refreshFile(q: Queryable, info: ObjectInfo): Promise<void> {
  await q.query(
    'storage-file-refresh',
    `UPDATE storage.files SET size = $2, content_type = $3, etag = $4, token = $5, updated_at = $6
      WHERE key = $1`,
    [info.key, info.size, info.contentType, info.etag, info.token, info.lastModified],
  );
}

/**
 * Imports the rows of objects found in the store, in one statement (a page of a listing); existing rows
 * are left as they are. Returns how many were added.
 */
export async function importFiles(q: Queryable, infos: readonly ObjectInfo[], now: Date): Promise<number> {
  if (infos.length === 0) return 0;
  const { rowCount } = await q.query(
    'storage-files-import',
    `INSERT INTO storage.files (key, size, content_type, etag, token, owner_id, created_at, updated_at)
     SELECT k, s, c, e, t, NULL, $6, to_timestamp(m / 1000.0)
       FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $7::float8[]) AS i(k, s, c, e, t, m)
     ON CONFLICT (key) DO NOTHING`,
    [
      infos.map((i) => i.key),
      infos.map((i) => i.size),
      infos.map((i) => i.contentType),
      infos.map((i) => i.etag),
      infos.map((i) => i.token),
      now,
      infos.map((i) => i.lastModified.getTime()),
    ],
  );
  return rowCount;
}

export async function deleteFileRow(q: Queryable, key: string): Promise<boolean> {
  const { rowCount } = await q.query('storage-file-delete', 'DELETE FROM storage.files WHERE key = $1', [
    key,
  ]);
  return rowCount > 0;
}

/** Every row's key after `after`, in byte order (reconciliation looks for rows whose object is gone). */
export async function fileKeysAfter(q: Queryable, after: string, limit: number): Promise<string[]> {
  const { rows } = await q.query<{ key: string }>(
    'storage-file-keys-after',
    'SELECT key FROM storage.files WHERE key > $1 ORDER BY key LIMIT $2',
    [after, limit],
  );
  return rows.map((r) => r.key);
}

// ---------------------------------------------------------------------------------------------------
// Quotas and reservations

/**
 * Serialises the quota decisions of one user until the transaction ends: a transaction-scoped advisory
 * lock on a hash of the user id (no row needs to exist; PostgreSQL releases it at commit or rollback).
 */
export async function lockOwner(tx: Queryable, ownerId: string): Promise<void> {
  await tx.query(
    'storage-quota-lock',
    "SELECT pg_advisory_xact_lock(hashtextextended('storage-quota:' || $1, 0))",
    [ownerId],
  );
}

/** The override of a user: `undefined` without one, `null` for unlimited, else bytes. */
export async function quotaOverride(q: Queryable, userId: string): Promise<number | null | undefined> {
  const { rows } = await q.query<{ quota_bytes: number | null }>(
    'storage-quota-override',
    'SELECT quota_bytes::float8 AS quota_bytes FROM storage.quotas WHERE user_id = $1',
    [userId],
  );
  const row = rows[0];
  return row === undefined ? undefined : row.quota_bytes === null ? null : Number(row.quota_bytes);
}

export async function setQuotaOverride(q: Queryable, userId: string, bytes: number | null): Promise<void> {
  await q.query(
    'storage-quota-set',
    `INSERT INTO storage.quotas (user_id, quota_bytes, updated_at) VALUES ($1, $2, now())
     ON CONFLICT (user_id) DO UPDATE SET quota_bytes = EXCLUDED.quota_bytes, updated_at = now()`,
    [userId, bytes],
  );
}

export async function clearQuotaOverride(q: Queryable, userId: string): Promise<void> {
  await q.query('storage-quota-clear', 'DELETE FROM storage.quotas WHERE user_id = $1', [userId]);
}

/** What a user owns: the sum of the sizes and the count of their files. */
export async function ownedFiles(q: Queryable, ownerId: string): Promise<{ bytes: number; files: number }> {
  const { rows } = await q.query<{ bytes: number; files: number }>(
    'storage-owned-files',
    'SELECT coalesce(sum(size), 0)::float8 AS bytes, count(*)::int AS files FROM storage.files WHERE owner_id = $1',
    [ownerId],
  );
  return { bytes: Number(rows[0]?.bytes ?? 0), files: Number(rows[0]?.files ?? 0) };
}

/** Bytes held by a user's live reservations, other than `except`. */
export async function reservedBytes(q: Queryable, ownerId: string, now: Date, except?: string) {
  const { rows } = await q.query<{ bytes: number }>(
    'storage-reserved-bytes',
    `SELECT coalesce(sum(bytes), 0)::float8 AS bytes FROM storage.upload_reservations
      WHERE owner_id = $1 AND expires_at > $2 AND ($3::uuid IS NULL OR id <> $3::uuid)`,
    [ownerId, now, except ?? null],
  );
  return Number(rows[0]?.bytes ?? 0);
}

export interface ReservationRow {
  id: string;
  key: string;
  ownerId: string | null;
  bytes: number;
  expiresAt: Date;
}

export async function insertReservation(q: Queryable, r: ReservationRow, now: Date): Promise<void> {
  await q.query(
    'storage-reservation-insert',
    `INSERT INTO storage.upload_reservations (id, key, owner_id, bytes, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [r.id, r.key, r.ownerId, r.bytes, now, r.expiresAt],
  );
}

export async function deleteReservation(q: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await q.query(
    'storage-reservation-delete',
    'DELETE FROM storage.upload_reservations WHERE id = $1',
    [id],
  );
  return rowCount > 0;
}

export async function extendReservation(q: Queryable, id: string, expiresAt: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    'storage-reservation-extend',
    'UPDATE storage.upload_reservations SET expires_at = $2 WHERE id = $1',
    [id, expiresAt],
  );
  return rowCount > 0;
}

/** Reservations whose lease ran out (uploads abandoned, or cut off by a crash), oldest first. */
export async function expiredReservations(q: Queryable, now: Date, limit: number): Promise<ReservationRow[]> {
  const { rows } = await q.query<{
    id: string;
    key: string;
    owner_id: string | null;
    bytes: number;
    expires_at: Date;
  }>(
    'storage-reservations-expired',
    `SELECT id, key, owner_id, bytes::float8 AS bytes, expires_at FROM storage.upload_reservations
      WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => ({
    id: r.id,
    key: r.key,
    ownerId: r.owner_id,
    bytes: Number(r.bytes),
    expiresAt: new Date(r.expires_at),
  }));
}

// ---------------------------------------------------------------------------------------------------
// Imports

export async function isImported(q: Queryable, store: string): Promise<boolean> {
  const { rows } = await q.query('storage-import-done', 'SELECT 1 FROM storage.imports WHERE store = $1', [
    store,
  ]);
  return rows.length > 0;
}

export async function markImported(q: Queryable, store: string, files: number, now: Date): Promise<void> {
  await q.query(
    'storage-import-mark',
    `INSERT INTO storage.imports (store, imported_at, files) VALUES ($1, $2, $3)
     ON CONFLICT (store) DO UPDATE SET imported_at = EXCLUDED.imported_at, files = EXCLUDED.files`,
    [store, now, files],
  );
}
