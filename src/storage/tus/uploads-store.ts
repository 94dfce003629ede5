/**
 * The rows of resumable uploads (storage.uploads, migration 0015): who owns an upload, where it lands,
 * its declared length and its last durable offset. Offsets only move forward through a compare-and-set,
 * so two writers of one upload (two instances, a retry racing a late request) can never both commit.
 */
import type { Queryable } from '../../db/database.ts';
import type { QuotaReservation } from '../quotas.ts';

export interface UploadRow {
  id: string;
  owner: string;
  key: string;
  length: number;
  offset: number;
  metadata: Record<string, string | null>;
  createdAt: Date;
  expiresAt: Date;
  completedAt: Date | null;
  reservation: QuotaReservation | null;
}

interface Raw {
  id: string;
  owner: string;
  key: string;
  upload_length: string | number;
  upload_offset: string | number;
  metadata: Record<string, string | null> | string;
  created_at: Date | string;
  expires_at: Date | string;
  completed_at: Date | string | null;
  reservation: QuotaReservation | string | null;
}

const COLUMNS =
  'id, owner, key, upload_length, upload_offset, metadata, created_at, expires_at, completed_at, reservation';

function toRow(r: Raw): UploadRow {
  return {
    id: r.id,
    owner: r.owner,
    key: r.key,
    length: Number(r.upload_length),
    offset: Number(r.upload_offset),
    metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata,
    createdAt: new Date(r.created_at),
    expiresAt: new Date(r.expires_at),
    completedAt: r.completed_at === null ? null : new Date(r.completed_at),
    reservation: typeof r.reservation === 'string' ? JSON.parse(r.reservation) : r.reservation,
  };
}

export async function insertUpload(
  db: Queryable,
  u: {
    id: string;
    owner: string;
    key: string;
    length: number;
    metadata: Record<string, string | null>;
    createdAt: Date;
    expiresAt: Date;
    reservation: QuotaReservation | null;
  },
): Promise<UploadRow> {
  const { rows } = await db.query<Raw>(
    'upload-insert',
    `INSERT INTO storage.uploads (id, owner, key, upload_length, metadata, created_at, expires_at, reservation)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8::jsonb)
     RETURNING ${COLUMNS}`,
    [
      u.id,
      u.owner,
      u.key,
      u.length,
      JSON.stringify(u.metadata),
      u.createdAt,
      u.expiresAt,
      u.reservation === null ? null : JSON.stringify(u.reservation),
    ],
  );
  return toRow(rows[0] as Raw);
}

export async function findUpload(db: Queryable, id: string): Promise<UploadRow | undefined> {
  const { rows } = await db.query<Raw>(
    'upload-find',
    `SELECT ${COLUMNS} FROM storage.uploads WHERE id = $1`,
    [id],
  );
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** Moves the offset from `from` to `to`; false when it was no longer `from` (or the upload is gone). */
export async function advanceOffset(db: Queryable, id: string, from: number, to: number): Promise<boolean> {
  const { rowCount } = await db.query(
    'upload-advance',
    `UPDATE storage.uploads SET upload_offset = $3
     WHERE id = $1 AND upload_offset = $2 AND completed_at IS NULL AND $3 <= upload_length`,
    [id, from, to],
  );
  return rowCount === 1;
}

export async function markCompleted(db: Queryable, id: string): Promise<void> {
  await db.query(
    'upload-complete',
    'UPDATE storage.uploads SET completed_at = now() WHERE id = $1 AND completed_at IS NULL',
    [id],
  );
}

/** Removes the row; the removed row (undefined when it was gone already). */
export async function deleteUpload(db: Queryable, id: string): Promise<UploadRow | undefined> {
  const { rows } = await db.query<Raw>(
    'upload-delete',
    `DELETE FROM storage.uploads WHERE id = $1 RETURNING ${COLUMNS}`,
    [id],
  );
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** Uploads whose time is up at `now` (finished or not), oldest first. */
export async function expiredUploads(db: Queryable, now: Date, limit: number): Promise<UploadRow[]> {
  const { rows } = await db.query<Raw>(
    'upload-expired',
    `SELECT ${COLUMNS} FROM storage.uploads WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2`,
    [now, limit],
  );
  return rows.map(toRow);
}
