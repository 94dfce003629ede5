/**
 * storage.shares rows (share links). A link is found by the SHA-256 hash of its secret id, never by the
 * secret itself; its owner manages it by the row's own id (the handle), which reveals nothing of the link.
 * Every instance reads the row on every download, so a revocation written here holds everywhere at once.
 */
import type { Queryable } from '../../db/database.ts';

export interface ShareRow {
  /** The handle: the row's id, shown in listings, taken by DELETE. */
  id: string;
  key: string;
  ownerId: string;
  createdAt: Date;
  expiresAt: Date;
  maxDownloads: number | null;
  downloads: number;
  revokedAt: Date | null;
}

interface RawRow {
  id: string;
  key: string;
  owner_id: string;
  created_at: Date;
  expires_at: Date;
  max_downloads: number | null;
  downloads: number;
  revoked_at: Date | null;
}

const COLUMNS = 'id, key, owner_id, created_at, expires_at, max_downloads, downloads, revoked_at';

function toShare(r: RawRow): ShareRow {
  return {
    id: r.id,
    key: r.key,
    ownerId: r.owner_id,
    createdAt: new Date(r.created_at),
    expiresAt: new Date(r.expires_at),
    maxDownloads: r.max_downloads,
    downloads: Number(r.downloads),
    revokedAt: r.revoked_at === null ? null : new Date(r.revoked_at),
  };
}

export interface NewShare {
  id: string;
  tokenHash: Buffer;
  key: string;
  ownerId: string;
  createdAt: Date;
  expiresAt: Date;
  maxDownloads: number | null;
}

/** The account here of a user id, and whether it is disabled; undefined when there is none. */
export async function findOwnerAccount(
  db: Queryable,
  userId: string,
): Promise<{ id: string; disabled: boolean } | undefined> {
  const { rows } = await db.query<{ id: string; disabled: boolean }>(
    'FindShareOwnerAccount',
    'SELECT id, disabled_at IS NOT NULL AS disabled FROM auth.accounts WHERE user_id = $1 LIMIT 1',
    [userId],
  );
  return rows[0];
}

/** Stores a new link; its account, when the owner has one here, is looked up in the same statement. */
export async function insertShare(db: Queryable, s: NewShare): Promise<ShareRow> {
  const { rows } = await db.query<RawRow>(
    'InsertShare',
    `INSERT INTO storage.shares (id, token_hash, key, owner_id, account_id, created_at, expires_at, max_downloads)
     VALUES ($1, $2, $3, $4, (SELECT id FROM auth.accounts WHERE user_id = $4 LIMIT 1), $5, $6, $7)
     RETURNING ${COLUMNS}`,
    [s.id, s.tokenHash, s.key, s.ownerId, s.createdAt, s.expiresAt, s.maxDownloads],
  );
  return toShare(rows[0] as RawRow);
}

/**
 * The link whose secret hashes to `tokenHash`, in whatever state, and whether its owner's account (when
 * they have one here) is disabled: a disabled account's links serve nothing.
 */
export async function findShareByHash(
  db: Queryable,
  tokenHash: Buffer,
): Promise<(ShareRow & { ownerDisabled: boolean }) | undefined> {
  const { rows } = await db.query<RawRow & { owner_disabled: boolean }>(
    'FindShareByHash',
    `SELECT ${COLUMNS.split(', ')
      .map((c) => `s.${c}`)
      .join(', ')}, a.disabled_at IS NOT NULL AS owner_disabled
       FROM storage.shares s LEFT JOIN auth.accounts a ON a.id = s.account_id
      WHERE s.token_hash = $1`,
    [tokenHash],
  );
  const r = rows[0];
  return r ? { ...toShare(r), ownerDisabled: r.owner_disabled === true } : undefined;
}

/**
 * Counts one download, atomically: the row is updated only while the link is live (not revoked, not
 * expired, downloads left, its owner's account not disabled), so concurrent downloads on any number of
 * instances never count past `max_downloads` (PostgreSQL re-checks the condition on the row it waited
 * for). The count after this download, or undefined when the link is no longer live.
 */
export async function claimDownload(db: Queryable, id: string, now: Date): Promise<number | undefined> {
  const { rows } = await db.query<{ downloads: number }>(
    'ClaimShareDownload',
    `UPDATE storage.shares s SET downloads = s.downloads + 1
      WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > $2
        AND (s.max_downloads IS NULL OR s.downloads < s.max_downloads)
        AND NOT EXISTS (SELECT 1 FROM auth.accounts a WHERE a.id = s.account_id AND a.disabled_at IS NOT NULL)
      RETURNING s.downloads`,
    [id, now],
  );
  return rows[0] ? Number(rows[0].downloads) : undefined;
}

/** The owner's links that are not revoked, newest first (expired and used-up ones included). */
export async function listShares(db: Queryable, ownerId: string): Promise<ShareRow[]> {
  const { rows } = await db.query<RawRow>(
    'ListShares',
    `SELECT ${COLUMNS} FROM storage.shares
      WHERE owner_id = $1 AND revoked_at IS NULL
      ORDER BY created_at DESC, id`,
    [ownerId],
  );
  return rows.map(toShare);
}

/**
 * Revokes one of the owner's links, named by its handle or by the hash of its secret; false when the
 * owner has no such live link (another owner's link included).
 */
export async function revokeShare(
  db: Queryable,
  ownerId: string,
  by: { id: string } | { tokenHash: Buffer },
  now: Date,
): Promise<boolean> {
  const { rowCount } =
    'id' in by
      ? await db.query(
          'RevokeShareById',
          `UPDATE storage.shares SET revoked_at = $3
            WHERE id = $1 AND owner_id = $2 AND revoked_at IS NULL`,
          [by.id, ownerId, now],
        )
      : await db.query(
          'RevokeShareByHash',
          `UPDATE storage.shares SET revoked_at = $3
            WHERE token_hash = $1 AND owner_id = $2 AND revoked_at IS NULL`,
          [by.tokenHash, ownerId, now],
        );
  return rowCount > 0;
}

/**
 * Forgets the owner's links that stopped working (expired or revoked) before `before`: rows kept until
 * then answer 410 rather than 404. Run when the owner makes a link, so the table holds no more than each
 * owner's recent links.
 */
export async function purgeDeadShares(db: Queryable, ownerId: string, before: Date): Promise<void> {
  await db.query(
    'PurgeDeadShares',
    `DELETE FROM storage.shares
      WHERE owner_id = $1 AND least(expires_at, coalesce(revoked_at, expires_at)) < $2`,
    [ownerId, before],
  );
}

/** Revokes every live link to `key` (its file was deleted). */
export async function revokeSharesOfKey(db: Queryable, key: string, now: Date): Promise<void> {
  await db.query(
    'RevokeSharesOfKey',
    'UPDATE storage.shares SET revoked_at = $2 WHERE key = $1 AND revoked_at IS NULL',
    [key, now],
  );
}
