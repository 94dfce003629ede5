/**
 * The storage operations behind the routes: who may do what (rules, admin secret), reads, folders,
 * deletes and token rotation; uploads are in upload.ts. Routes parse and shape; everything that decides
 * lives here, down to forgetting the image variants of a file that changed.
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Config } from '../config.ts';
import { secretsEqual } from '../constant-time.ts';
import { AppError } from '../errors.ts';
import { objectStoreErrorEvent } from '../metrics/events.ts';
import type { ByteRange, ObjectInfo, ObjectStore } from './backends/object-store.ts';
import { StoreUnavailable } from './backends/object-store.ts';
import { type FilesDeps, fileChanged, filesWithPrefix, hasRow, removeFile } from './files.ts';
import { isReservedKey, type ParsedKey } from './keys.ts';
import { describeDecision, fileTokens, formatExplanation } from './rules/explain.ts';
import type { Decision, Operation, RuleInput, StorageRules } from './rules/rules.ts';
import { revokeSharesOfKey } from './shares/shares-store.ts';

export interface StorageDeps extends FilesDeps {
  readonly config: Config;
  readonly objects: ObjectStore;
  readonly rules: StorageRules;
  /** Cached image variants (images/service.ts), forgotten when their source is overwritten or deleted. */
  readonly images: { forget(sourceKey: string): Promise<void> };
}

/** What the rules know about a request. */
export interface Caller {
  method: string;
  query: Record<string, unknown>;
  auth: Record<string, unknown> | undefined;
  /**
   * A right `x-admin-secret`: the rules are bypassed. Decided once, where the caller is resolved
   * (routes/common.ts), under the guess limits.
   */
  admin: boolean;
  /** Whether an `x-admin-secret` header was sent at all (only to word a refusal). */
  adminSecretSent?: boolean;
  /** The request's logger: at debug level, a refusal by the rules is logged with its trace. */
  log?: DenialLog;
}

/** The part of a pino logger a refusal is logged with. */
export interface DenialLog {
  readonly level: string;
  debug(obj: object, msg: string): void;
}

/** HBP's stored-file metadata object, exactly these fields in this order (spec §2, contract S17). */
export interface FileMetadata {
  key: string;
  AcceptRanges: 'bytes';
  LastModified: string;
  ContentLength: number;
  ETag: string;
  ContentType: string;
  Metadata: { token: string };
}

export function toMetadata(info: ObjectInfo): FileMetadata {
  return {
    key: info.key,
    AcceptRanges: 'bytes',
    LastModified: info.lastModified.toISOString(),
    ContentLength: info.size,
    ETag: info.etag,
    ContentType: info.contentType,
    Metadata: { token: info.token },
  };
}

/** Store failures the caller can do nothing about become 503; everything else passes. */
export async function store<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof StoreUnavailable) {
      objectStoreErrorEvent();
      throw new AppError('STORAGE_UNAVAILABLE', undefined, { cause: err });
    }
    throw err;
  }
}

/**
 * The admin bypass: only with a non-empty HASURA_GRAPHQL_ADMIN_SECRET, compared in constant time
 * (HBP let everyone through when the secret was unset, contract D3).
 */
export function isAdmin(config: Config, header: string | undefined): boolean {
  const secret = config.HASURA_GRAPHQL_ADMIN_SECRET;
  if (!secret || header === undefined || header === '') return false;
  return secretsEqual(secret, header);
}

export function ruleInput(key: ParsedKey | string, caller: Caller, resource: unknown): RuleInput {
  const path = typeof key === 'string' ? `/${key}` : key.path;
  return { path, method: caller.method, query: caller.query, auth: caller.auth, resource };
}

/**
 * The 403 of a refusal by the rules, saying which path entry refused which operation and, to an anonymous
 * caller, that signing in may help. Nothing that depends on the file (whether it exists, its token) or
 * on the rule's evaluation goes into it, so the answer reads the same for a missing file.
 */
export function forbidden(decision: Decision, op: Operation, caller: Caller): AppError {
  if (decision.allowed !== false) return new AppError('FORBIDDEN');
  const who = caller.auth ? 'this user' : 'an anonymous caller (no access token was sent)';
  const message = decision.entry
    ? `Forbidden by the storage rules: the rules of path "${decision.entry}" (${decision.tried.join(', ')}) do not allow ${op} to ${who}.`
    : `Forbidden by the storage rules: no path in the rules allows ${op} here (a path that no entry matches is refused).`;
  return new AppError('FORBIDDEN', message);
}

/**
 * The 403 of a refusal (forbidden), logged first at debug level with the trace of the decision: the
 * same rules evaluated again, traced, which costs nothing unless debug logging is on. One line; file
 * tokens in it are masked (rules/explain.ts).
 */
export function refused(
  deps: StorageDeps,
  op: Operation,
  input: RuleInput,
  caller: Caller,
  decision: Decision,
): AppError {
  const log = caller.log;
  if (log && (log.level === 'debug' || log.level === 'trace')) {
    const e = deps.rules.explain(op, input);
    log.debug(
      {
        storageRules: {
          operation: op,
          path: input.path,
          decision: describeDecision(e.decision),
          trace: formatExplanation(e, fileTokens(input.query, input.resource)),
        },
      },
      'storage request refused by the rules',
    );
  }
  return forbidden(decision, op, caller);
}

function allowed(
  deps: StorageDeps,
  op: Operation,
  key: ParsedKey | string,
  caller: Caller,
  resource: unknown,
): boolean {
  return deps.rules.decide(op, ruleInput(key, caller, resource)).allowed === true;
}

function requireAllowed(
  deps: StorageDeps,
  op: Operation,
  key: ParsedKey,
  caller: Caller,
  resource: unknown,
): void {
  if (caller.admin) return;
  const input = ruleInput(key, caller, resource);
  const decision = deps.rules.decide(op, input);
  if (decision.allowed !== true) throw refused(deps, op, input, caller, decision);
}

function fileKey(key: ParsedKey): void {
  if (key.folder)
    throw new AppError('INVALID_KEY', 'The file path is not valid: it names a folder (trailing "/").');
}

// ---------------------------------------------------------------------------------------------------
// Reads

export interface ReadableFile {
  info: ObjectInfo;
  /**
   * Whether an anonymous caller without a token may read it (decides Cache-Control). Worked out on first
   * read: the metadata route never asks, and the second rule check was half of its rule cost.
   */
  readonly public: boolean;
}

/**
 * Access check and metadata for one file. A missing file answers 404 only to callers the rules would
 * let read it; others get 403, so the existence of files they cannot read stays hidden.
 */
export async function resolveFile(deps: StorageDeps, key: ParsedKey, caller: Caller): Promise<ReadableFile> {
  fileKey(key);
  return readAccess(deps, key, caller, await headVisible(deps, key.key));
}

/**
 * The metadata of the file at `key`, access not considered; undefined when there is none. An object
 * without its row (an upload that never completed) is not a file yet: as if missing.
 */
export async function headVisible(deps: StorageDeps, key: string): Promise<ObjectInfo | undefined> {
  const row = hasRow(deps, key);
  if (row === undefined) return store(() => deps.objects.head(key));
  const [info, isFile] = await Promise.all([store(() => deps.objects.head(key)), row]);
  return isFile ? info : undefined;
}

/**
 * The file at `key`, opened, access not considered; undefined when there is none (an object without its
 * row included, none of whose bytes are read).
 */
export async function getVisible(
  deps: StorageDeps,
  key: string,
): Promise<{ info: ObjectInfo; body: Readable } | undefined> {
  const reading = store(() => deps.objects.get(key));
  const lookup = hasRow(deps, key);
  if (lookup === undefined) return reading;
  const [read, row] = await Promise.allSettled([reading, lookup]);
  if (read.status === 'rejected') throw read.reason;
  const got = read.value;
  if (row.status === 'rejected') {
    got?.body.destroy();
    throw row.reason;
  }
  if (!row.value && got) {
    // Not a file until its upload completed (files.ts).
    got.body.destroy();
    return undefined;
  }
  return got;
}

function readAccess(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
  info: ObjectInfo | undefined,
): ReadableFile {
  const resource = info ? toMetadata(info) : undefined;
  requireAllowed(deps, 'get', key, caller, resource);
  if (!info) throw new AppError('NOT_FOUND');
  let isPublic: boolean | undefined;
  return {
    info,
    get public() {
      if (isPublic === undefined) {
        const anonymous: Caller = {
          method: caller.method,
          query: {},
          auth: undefined,
          admin: false,
        };
        isPublic = allowed(deps, 'get', key, anonymous, resource);
      }
      return isPublic;
    },
  };
}

/**
 * A whole file, opened first and checked after: one store read instead of a metadata read and then a
 * body read (on S3, a GetObject instead of a HeadObject and a GetObject). The rules see the metadata the
 * store returned with the body, so the same decision as resolveFile's, with the same 404/403; a refused
 * body is closed unread, so no byte of it is ever sent. Headers taken from `file.info` describe exactly
 * the bytes of `body`.
 */
export async function openWholeFile(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
): Promise<{ file: ReadableFile; body: Readable }> {
  fileKey(key);
  const got = await getVisible(deps, key.key);
  try {
    const file = readAccess(deps, key, caller, got?.info);
    if (!got) throw new AppError('NOT_FOUND');
    return { file, body: got.body };
  } catch (err) {
    got?.body.destroy();
    throw err;
  }
}

/**
 * Where a download's file comes from and who decided it may be read: the storage rules for the caller
 * (`ruleCheckedFile`), or a share link (shares/shares.ts). The sending (validators, ranges, images) is
 * the same for both.
 */
export interface FileSource {
  /** Metadata, access settled (resolveFile). */
  resolve(): Promise<ReadableFile>;
  /** The whole file, opened first and access settled after (openWholeFile). */
  openWhole(): Promise<{ file: ReadableFile; body: Readable }>;
  /**
   * Called once when the answer will carry bytes of the file (not for HEAD, 304 or 416), after they are
   * opened and before anything is sent; a throw refuses the request. A share link counts its download
   * here.
   */
  beforeBytes?(): Promise<void>;
}

/** A file read under the storage rules, as the caller. */
export function ruleCheckedFile(deps: StorageDeps, key: ParsedKey, caller: Caller): FileSource {
  return {
    resolve: () => resolveFile(deps, key, caller),
    openWhole: () => openWholeFile(deps, key, caller),
  };
}

/**
 * Opens the bytes (all, or one range) of the version `info` describes. When the file has changed since
 * `info` was read, rejects with ObjectChanged (backends/object-store.ts) rather than return bytes the
 * caller's headers do not describe.
 */
export async function openFile(deps: StorageDeps, info: ObjectInfo, range?: ByteRange): Promise<Readable> {
  const got = await store(() => deps.objects.get(info.key, range, info));
  if (!got) throw new AppError('NOT_FOUND');
  return got.body;
}

/** Whether the store no longer has `key` (false when it cannot say): a zip leaves such a file out. */
export async function fileGone(deps: StorageDeps, key: string): Promise<boolean> {
  try {
    return (await deps.objects.head(key)) === undefined;
  } catch {
    return false;
  }
}

/** The whole of the version `info` describes, in memory (small files only); ObjectChanged as openFile. */
export async function readFileBytes(deps: StorageDeps, info: ObjectInfo): Promise<Buffer> {
  return store(() => deps.objects.read(info.key, info));
}

/**
 * The files of a folder the caller may list: the folder itself must pass `list`/`read`, then each file
 * its own entry's `list`/`read` with its own path variables and metadata (HBP used the folder's, D21).
 * `forZip` also requires `get`/`read` on each file, since a zip hands out the bytes.
 */
export async function* listFolder(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
  opts: { forZip?: boolean } = {},
): AsyncIterable<ObjectInfo> {
  if (!key.folder)
    throw new AppError('INVALID_KEY', 'The file path is not valid: a folder path ends with "/".');
  const { admin } = caller;
  if (!admin) {
    const input = ruleInput(key, caller, undefined);
    const decision = deps.rules.decide('list', input);
    if (decision.allowed !== true) throw refused(deps, 'list', input, caller, decision);
  }
  // The table, once this instance reads it: one index range scan instead of listing the store.
  const items = deps.catalog.imported ? filesWithPrefix(deps, key.key) : deps.objects.list(key.key);
  const it = items[Symbol.asyncIterator]();
  for (;;) {
    const r = await store(() => it.next());
    if (r.done) return;
    const info = r.value;
    // Parts of uploads in progress (S3: under the reserved prefix of the bucket) are never files.
    if (isReservedKey(info.key)) continue;
    if (!admin) {
      const meta = toMetadata(info);
      if (!allowed(deps, 'list', info.key, caller, meta)) continue;
      if (opts.forZip && !allowed(deps, 'get', info.key, caller, meta)) continue;
    }
    yield info;
  }
}

// ---------------------------------------------------------------------------------------------------
// Delete and token rotation

export async function deleteFile(deps: StorageDeps, key: ParsedKey, caller: Caller): Promise<void> {
  fileKey(key);
  const info = await store(() => deps.objects.head(key.key));
  requireAllowed(deps, 'delete', key, caller, info ? toMetadata(info) : undefined);
  if (!info) throw new AppError('NOT_FOUND');
  // Its share links first: when this fails the file stays, and never is a file gone with its links alive
  // (a file put at the same path later must not be served by them).
  await revokeSharesOfKey(deps.db, key.key, deps.clock.now());
  if (!(await removeFile(deps, key.key, () => store(() => deps.objects.delete(key.key)))))
    throw new AppError('NOT_FOUND');
}

/** `DELETE /storage/m/<file>`: a new token, under the `delete`/`write` rules (as HBP). */
export async function rotateTokenByRules(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
): Promise<ObjectInfo> {
  fileKey(key);
  const info = await store(() => deps.objects.head(key.key));
  requireAllowed(deps, 'delete', key, caller, info ? toMetadata(info) : undefined);
  return setNewToken(deps, key);
}

/** `POST /storage/m/<file>` `{action: "revoke-token"}`: admin secret only, rules are not consulted. */
export async function revokeTokenAsAdmin(
  deps: StorageDeps,
  key: ParsedKey,
  caller: Caller,
): Promise<ObjectInfo> {
  fileKey(key);
  if (!caller.admin) {
    throw new AppError(
      'INCORRECT_ACCESS_TOKEN',
      !deps.config.HASURA_GRAPHQL_ADMIN_SECRET
        ? 'revoke-token needs the admin secret, and this server has none (HASURA_GRAPHQL_ADMIN_SECRET is empty); DELETE /storage/m/<file> gives the file a new token under the rules instead.'
        : caller.adminSecretSent
          ? 'revoke-token needs the admin secret: the x-admin-secret header sent is not it.'
          : 'revoke-token needs the admin secret in the x-admin-secret header.',
    );
  }
  return setNewToken(deps, key);
}

async function setNewToken(deps: StorageDeps, key: ParsedKey): Promise<ObjectInfo> {
  const info = await store(() => deps.objects.setToken(key.key, randomUUID()));
  if (!info) throw new AppError('NOT_FOUND');
  await fileChanged(deps, info);
  return info;
}
