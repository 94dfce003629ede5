/**
 * Share links: a signed-in user who may read a file makes a link that anyone holding it can download
 * without signing in (`GET /storage/s/<id>`), until it expires, is revoked, or has served its
 * `max_downloads`.
 *
 * - The link id is 192 random bits (base64url), shown once, in the answer that makes it; only its SHA-256
 *   hash is stored, and listings never show it again: the owner manages a link by its handle (the row's
 *   uuid) or by the id itself.
 * - Every download reads the row and counts itself in one conditional UPDATE, so revoking (a row write)
 *   holds on every instance at once, and concurrent downloads never exceed `max_downloads`.
 * - What counts as a download: every answer that carries bytes of the file (200, a 206 range, a
 *   transformed image). HEAD, 304 and 416 do not count, but need a live link. Counting ranges too keeps
 *   the limit a limit: a client cannot fetch the whole file range by range without it counting.
 * - Access is settled when the link is made (the storage rules, as the creator); the link then stands on
 *   its own. A link dies with its file (deleting the file revokes it) and with its owner's account
 *   (deleted: the rows go; disabled: its links serve nothing).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { PermissionVariables } from '../../auth/jwt.ts';
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { checkedKey, type ParsedKey } from '../keys.ts';
import {
  type Caller,
  type DenialLog,
  type FileSource,
  getVisible,
  headVisible,
  type ReadableFile,
  resolveFile,
  type StorageDeps,
} from '../service.ts';
import {
  claimDownload,
  findOwnerAccount,
  findShareByHash,
  insertShare,
  listShares,
  purgeDeadShares,
  revokeShare,
  type ShareRow,
} from './shares-store.ts';

/** Random bytes of a link id: 192 bits, 32 base64url characters. */
const ID_BYTES = 24;
const ID_SHAPE = /^[A-Za-z0-9_-]{32}$/;
/** How long a link that stopped working is kept (answering 410, not 404) before it is forgotten. */
const KEEP_DEAD_MS = 30 * 86_400_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ShareDeps {
  readonly config: Pick<
    Config,
    'AUTH_ENABLED' | 'SERVER_URL' | 'STORAGE_SHARE_MAX_SECONDS' | 'STORAGE_SHARE_DEFAULT_SECONDS'
  >;
  readonly db: Queryable;
  readonly clock: Clock;
}

export interface NewShareInput {
  path: string;
  expires_in?: number;
  max_downloads?: number;
}

/** The answer that makes a link: the only one that ever shows its id. */
export interface CreatedShare {
  id: string;
  url: string;
  handle: string;
  path: string;
  expires_at: string;
  max_downloads: number | null;
}

export type ShareStatus = 'active' | 'expired' | 'used_up';

/** A link as its owner's listing shows it: never its id. */
export interface ListedShare {
  handle: string;
  path: string;
  created_at: string;
  expires_at: string;
  max_downloads: number | null;
  downloads: number;
  status: ShareStatus;
}

function hashOf(id: string): Buffer {
  return createHash('sha256').update(id).digest();
}

/** The public address of a link. */
export function shareUrl(config: Pick<Config, 'SERVER_URL'>, id: string): string {
  return `${config.SERVER_URL.replace(/\/+$/, '')}/storage/s/${id}`;
}

/** The key a share is made for: a file path as in `/storage/o/<path>`, decoded, with or without a leading "/". */
function shareKey(path: string): ParsedKey {
  const key = checkedKey(path.startsWith('/') ? path.slice(1) : path);
  if (key.folder || key.key === '')
    throw new AppError(
      'INVALID_KEY',
      'The file path is not valid: a share link is for one file, not a folder.',
    );
  return key;
}

/**
 * The owner a signed-in caller is, by the user id of their token. Where this service issues the tokens
 * (AUTH_ENABLED), the account must still exist (401 otherwise: deleted since the token was issued, so a
 * link can never outlive its account) and not be disabled. Without AUTH (tokens of another issuer) the
 * token's user id is the owner.
 */
async function ownerOf(deps: ShareDeps, user: PermissionVariables): Promise<string> {
  const userId = user['user-id'];
  if (deps.config.AUTH_ENABLED) {
    const account = await findOwnerAccount(deps.db, userId);
    if (!account) throw new AppError('UNAUTHENTICATED');
    if (account.disabled) throw new AppError('ACCOUNT_DISABLED');
  }
  return userId;
}

/**
 * Makes a link to the file at `input.path` for `user`, who must be allowed to read it by the storage
 * rules (403 otherwise; 404 when it does not exist and they could read it).
 */
export async function createShare(
  deps: ShareDeps,
  storage: StorageDeps,
  user: PermissionVariables,
  input: NewShareInput,
  log?: DenialLog,
): Promise<CreatedShare> {
  const { config } = deps;
  const seconds = input.expires_in ?? config.STORAGE_SHARE_DEFAULT_SECONDS;
  if (seconds > config.STORAGE_SHARE_MAX_SECONDS)
    throw new AppError(
      'VALIDATION',
      `"expires_in" must be at most ${config.STORAGE_SHARE_MAX_SECONDS} seconds (STORAGE_SHARE_MAX_SECONDS).`,
    );
  const key = shareKey(input.path);
  const ownerId = await ownerOf(deps, user);
  // Read access as the creator, without a file token: a link hands the file to anyone, so only someone
  // the rules let read it themselves may make one.
  const caller: Caller = { method: 'GET', query: {}, auth: user, admin: false, log };
  await resolveFile(storage, key, caller);
  const id = randomBytes(ID_BYTES).toString('base64url');
  const now = deps.clock.now();
  const row = await insertShare(deps.db, {
    id: randomUUID(),
    tokenHash: hashOf(id),
    key: key.key,
    ownerId,
    createdAt: now,
    expiresAt: new Date(now.getTime() + seconds * 1000),
    maxDownloads: input.max_downloads ?? null,
  });
  await purgeDeadShares(deps.db, ownerId, new Date(now.getTime() - KEEP_DEAD_MS));
  return {
    id,
    url: shareUrl(config, id),
    handle: row.id,
    path: row.key,
    expires_at: row.expiresAt.toISOString(),
    max_downloads: row.maxDownloads,
  };
}

function statusOf(row: ShareRow, now: Date): ShareStatus {
  if (row.expiresAt.getTime() <= now.getTime()) return 'expired';
  if (row.maxDownloads !== null && row.downloads >= row.maxDownloads) return 'used_up';
  return 'active';
}

/** The owner's links that are not revoked, newest first, with their download counts. */
export async function listOwnShares(deps: ShareDeps, user: PermissionVariables): Promise<ListedShare[]> {
  const ownerId = await ownerOf(deps, user);
  const now = deps.clock.now();
  return (await listShares(deps.db, ownerId)).map((row) => ({
    handle: row.id,
    path: row.key,
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    max_downloads: row.maxDownloads,
    downloads: row.downloads,
    status: statusOf(row, now),
  }));
}

/**
 * Revokes one of the owner's links, named by its handle or by its id. Another owner's link, an unknown
 * or already revoked one, and anything that is neither shape answer the same 404.
 */
export async function revokeOwnShare(deps: ShareDeps, user: PermissionVariables, ref: string): Promise<void> {
  const ownerId = await ownerOf(deps, user);
  const now = deps.clock.now();
  const by = UUID.test(ref)
    ? { id: ref.toLowerCase() }
    : ID_SHAPE.test(ref)
      ? { tokenHash: hashOf(ref) }
      : undefined;
  if (!by || !(await revokeShare(deps.db, ownerId, by, now))) throw new AppError('SHARE_LINK_NOT_FOUND');
}

/**
 * The file a link serves, as a FileSource for the download routes: 404 for an id no link has, 410 for a
 * link that no longer works (its file deleted included). The download is counted in `beforeBytes`.
 */
export async function sharedFile(deps: ShareDeps, storage: StorageDeps, id: string): Promise<FileSource> {
  const row = ID_SHAPE.test(id) ? await findShareByHash(deps.db, hashOf(id)) : undefined;
  if (!row) throw new AppError('SHARE_LINK_NOT_FOUND');
  if (row.revokedAt !== null || row.ownerDisabled || statusOf(row, deps.clock.now()) !== 'active')
    throw new AppError('SHARE_LINK_GONE');
  const key = row.key;
  const gone = () => new AppError('SHARE_LINK_GONE');
  // Caching follows the private files' rule: a cache may keep it only for this client, and asks again.
  const readable = (info: ReadableFile['info']): ReadableFile => ({ info, public: false });
  return {
    async resolve() {
      const info = await headVisible(storage, key);
      if (!info) throw gone();
      return readable(info);
    },
    async openWhole(): Promise<{ file: ReadableFile; body: Readable }> {
      const got = await getVisible(storage, key);
      if (!got) throw gone();
      return { file: readable(got.info), body: got.body };
    },
    async beforeBytes() {
      if ((await claimDownload(deps.db, row.id, deps.clock.now())) === undefined) throw gone();
    },
  };
}
