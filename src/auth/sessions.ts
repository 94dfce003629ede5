/**
 * Sessions: a refresh token (opaque, 256 bits, stored hashed) plus a short-lived access token (JWT).
 * Refreshing rotates the token. A rotated token presented again within REFRESH_TOKEN_REUSE_INTERVAL
 * seconds (two tabs racing) gets a fresh sibling in the same family; presented later it is taken as
 * stolen and the whole family (that sign-in) is revoked. Every token of a family keeps the instant of
 * its sign-in, and every access token issued from it carries that instant as `auth_time` and the
 * family's id (the session's id) as `sid`. Ending a session refuses its access tokens at once too
 * (revocations.ts), not only its refresh tokens.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { eventRow, onlyTheFeed, recordEvent } from '../events/record.ts';
import type { AccountEvent, EventClient, SessionEndReason } from '../events/types.ts';
import type { MailPort } from '../mail/port.ts';
import { refreshEvent } from '../metrics/events.ts';
import { type AccountProfile, loadProfile } from './accounts-store.ts';
import { customClaimsConfigured, withCustomClaims } from './custom-claims.ts';
import type { SessionDeps } from './deps.ts';
import { type PermissionVariables, permissionVariables, type SignedToken, signAccessToken } from './jwt.ts';
import { noNoticeDue, noticeNewDevice } from './new-device.ts';
import { revoke } from './revocations.ts';
import type { PublicUser } from './schemas.ts';
import { newRefreshToken, sha256Hex } from './secrets.ts';
import {
  AccountGone,
  deleteAccountSessions,
  deleteSession,
  findSessionToken,
  insertSessionToken,
  listAccountSessions,
  type NewSessionToken,
  rotateSessionToken,
  type SessionOrigin,
  sessionMethod,
} from './sessions-store.ts';

export interface Session {
  accountId: string;
  familyId: string;
  /** True when this session began now (a sign-in), false for a refresh of an existing one. */
  started: boolean;
  access: SignedToken;
  permissionVariables: PermissionVariables;
  refreshToken: string;
  refreshExpiresAt: Date;
  user: PublicUser;
}

/** The `user` object of responses: HBP's fields, with avatar_url when set. */
export function publicUser(profile: AccountProfile): PublicUser {
  const u: PublicUser = {
    id: profile.user.id,
    display_name: profile.user.display_name ?? null,
    email: profile.account.email,
  };
  if (typeof profile.user.avatar_url === 'string') u.avatar_url = profile.user.avatar_url;
  return u;
}

/** The permission variables an access token of the account carries now (roles and custom fields re-read). */
export function claimsOf(config: SessionDeps['config'], profile: AccountProfile): PermissionVariables {
  return permissionVariables(
    {
      userId: profile.user.id,
      defaultRole: profile.account.default_role,
      roles: profile.roles,
      customFields: profile.user,
    },
    config.JWT_CUSTOM_FIELDS,
  );
}

/**
 * An access token for the account as it is now (roles and custom fields re-read), for the session
 * `sessionId` whose sign-in happened at `signedInAt` (null: unknown).
 */
export async function accessTokenFor(
  deps: SessionDeps,
  profile: AccountProfile,
  now: Date,
  signedInAt: Date | null,
  sessionId: string,
  vars: PermissionVariables = claimsOf(deps.config, profile),
) {
  return {
    vars,
    access: await signAccessToken(deps.keys, deps.config, vars, now, { authTime: signedInAt, sessionId }),
  };
}

/** A session about to be stored: its refresh token and row (whose `createdAt` the JWT's iat repeats). */
interface SessionDraft {
  refreshToken: string;
  row: NewSessionToken;
}

/**
 * A new token for `accountId`. Without `family` it starts a new sign-in (family and sign-in instant are
 * new); with it, the token joins that sign-in and keeps its instant.
 */
function draftSession(
  deps: SessionDeps,
  accountId: string,
  family?: { familyId: string; signedInAt: Date | null },
  origin?: SessionOrigin,
): SessionDraft {
  const now = deps.clock.now();
  const refreshToken = newRefreshToken();
  // Exact minutes (HBP truncated to whole days, so short lifetimes expired at once).
  const expiresAt = new Date(now.getTime() + deps.config.JWT_REFRESH_EXPIRES_IN * 60_000);
  return {
    refreshToken,
    row: {
      tokenHash: sha256Hex(refreshToken),
      familyId: family?.familyId ?? randomUUID(),
      accountId,
      createdAt: now,
      expiresAt,
      signedInAt: family ? family.signedInAt : now,
      // Only a token that starts a session describes it.
      origin: family ? undefined : (origin ?? { method: null }),
    },
  };
}

/** The stored draft as a session, with its access token. */
async function completeSession(
  deps: SessionDeps,
  draft: SessionDraft,
  profile: AccountProfile,
  claims: PermissionVariables,
): Promise<Session> {
  // The same instant for the token row and the JWT's iat: it is how a bearer-only caller's sign-in is found.
  const { vars, access } = await accessTokenFor(
    deps,
    profile,
    draft.row.createdAt,
    draft.row.signedInAt,
    draft.row.familyId,
    claims,
  );
  return {
    accountId: draft.row.accountId,
    familyId: draft.row.familyId,
    started: draft.row.origin !== undefined,
    access,
    permissionVariables: vars,
    refreshToken: draft.refreshToken,
    refreshExpiresAt: draft.row.expiresAt,
    user: publicUser(profile),
  };
}

/**
 * Opens a session for an account: a new refresh token and an access token. Every caller but the refresh
 * is a sign-in (password, magic link, MFA, activation…), which starts a new family signed in now; the
 * refresh passes `family` to add a token to an existing sign-in. `db` lets callers include the insert in
 * their transaction.
 */
export async function issueSession(
  deps: SessionDeps & { readonly mailer?: MailPort },
  accountId: string,
  opts: {
    family?: { familyId: string; signedInAt: Date | null };
    db?: Queryable;
    profile?: AccountProfile;
    /** How the sign-in was made (password, magic-link, mfa, oauth:<provider>, passkey, anonymous…). */
    method?: string;
    /** The client signing in: stored with the session and its sign_in event. */
    client?: EventClient;
  } = {},
): Promise<Session> {
  // A sign-in writes its session and its event together: in one statement when that is all it writes,
  // else in the caller's transaction or in one of its own.
  if (!opts.db && !opts.family) {
    const quick = await signInInOneStatement(deps, accountId, opts);
    if (quick.session) return quick.session;
    return deps.db.transaction((tx) =>
      issueSession(deps, accountId, { ...opts, db: tx, profile: quick.profile }),
    );
  }
  const db = opts.db ?? deps.db;
  const profile = opts.profile ?? (await loadProfile(db, accountId));
  // A sign-in that races the account's deletion: the account is gone, as for a caller who never had one.
  if (!profile) throw new AppError('UNAUTHENTICATED', 'The account no longer exists.');
  // Every sign-in (password, MFA, magic link, activation, provider) ends here: a disabled account gets
  // no session whichever way it came.
  if (profile.account.disabled) throw new AppError('ACCOUNT_DISABLED');
  const client = opts.client ?? null;
  const draft = draftSession(deps, accountId, opts.family, {
    method: opts.method ?? null,
    userAgent: clampUserAgent(client?.userAgent ?? null),
    ip: client?.ip ?? null,
  });
  const store = async (tx: Queryable) => {
    // The app's claims first: a hook that refuses leaves no session behind (custom-claims.ts).
    const claims = await claimsFor(deps, tx, draft, profile, opts.method ?? null);
    // Also drops the account's expired tokens.
    await insertSessionToken(tx, draft.row).catch((err: unknown) => {
      throw err instanceof AccountGone
        ? new AppError('UNAUTHENTICATED', 'The account no longer exists.')
        : err;
    });
    if (!opts.family) {
      await noticeNewDevice(deps, tx, {
        profile,
        sessionId: draft.row.familyId,
        client,
        method: opts.method ?? 'unknown',
      });
      await recordEvent(deps, tx, {
        type: 'sign_in',
        accountId,
        sessionId: draft.row.familyId,
        client,
        details: { method: opts.method ?? 'unknown' },
      });
    }
    return claims;
  };
  // Without a transaction of the caller's, the claims function and the insert get one of their own.
  const claims =
    opts.db !== undefined || !customClaimsConfigured(deps.config)
      ? await store(db)
      : await deps.db.transaction(store);
  return completeSession(deps, draft, profile, claims);
}

/**
 * A sign-in whose only writes are its session and its `sign_in` event (no custom claims, no webhook for
 * the event, no new-device notice due after the one-probe check) is stored by one statement: the session
 * insert with the event as a further CTE, atomic as the transaction it replaces: two round trips (the
 * probe, the statement) instead of five (BEGIN, session, probe, event, COMMIT); the login row went from
 * 0.60-0.63x to 0.67-0.68x on PostgreSQL (docs/performance.md). Otherwise `session` is undefined and the
 * caller takes the transaction, with the profile read here.
 */
async function signInInOneStatement(
  deps: SessionDeps & { readonly mailer?: MailPort },
  accountId: string,
  opts: { profile?: AccountProfile; method?: string; client?: EventClient },
): Promise<{ session?: Session; profile?: AccountProfile }> {
  if (customClaimsConfigured(deps.config)) return { profile: opts.profile };
  const profile = opts.profile ?? (await loadProfile(deps.db, accountId));
  if (!profile) throw new AppError('UNAUTHENTICATED', 'The account no longer exists.');
  if (profile.account.disabled) throw new AppError('ACCOUNT_DISABLED');
  const client = opts.client ?? null;
  const draft = draftSession(deps, accountId, undefined, {
    method: opts.method ?? null,
    userAgent: clampUserAgent(client?.userAgent ?? null),
    ip: client?.ip ?? null,
  });
  const event: AccountEvent = {
    type: 'sign_in',
    accountId,
    sessionId: draft.row.familyId,
    client,
    details: { method: opts.method ?? 'unknown' },
  };
  if (!onlyTheFeed(deps, event)) return { profile };
  if (!(await noNoticeDue(deps, deps.db, { profile, sessionId: draft.row.familyId, client })))
    return { profile };
  await insertSessionToken(deps.db, draft.row, eventRow(deps, event)).catch((err: unknown) => {
    throw err instanceof AccountGone ? new AppError('UNAUTHENTICATED', 'The account no longer exists.') : err;
  });
  return { session: await completeSession(deps, draft, profile, claimsOf(deps.config, profile)), profile };
}

/** The claims of the token `draft` is issued with: the service's, and the app's (custom-claims.ts). */
async function claimsFor(
  deps: SessionDeps,
  db: Queryable,
  draft: SessionDraft,
  profile: AccountProfile,
  method: string | null,
): Promise<PermissionVariables> {
  const vars = claimsOf(deps.config, profile);
  if (!customClaimsConfigured(deps.config)) return vars;
  // A refresh (or a grace sibling) is told how its session began.
  const how = draft.row.origin ? method : await sessionMethod(db, draft.row.familyId);
  return withCustomClaims(
    deps.config,
    db,
    draft.row.createdAt,
    profile,
    { id: draft.row.familyId, method: how },
    vars,
  );
}

/** The refusal of a refresh, counted under its outcome. */
function invalidRefresh(outcome: 'invalid' | 'reuse_detected'): AppError {
  refreshEvent(outcome);
  return new AppError('INVALID_REFRESH_TOKEN');
}

/** Rotates a refresh token into a new session; 401 when it is unknown, expired, revoked or its account inactive or disabled. */
export async function refreshSession(deps: SessionDeps, presented: string): Promise<Session> {
  try {
    return await rotate(deps, presented);
  } catch (err) {
    // The account was deleted while its token was being rotated: the token is as dead as its account.
    if (err instanceof AccountGone || (err instanceof AppError && err.code === 'UNAUTHENTICATED'))
      throw invalidRefresh('invalid');
    throw err;
  }
}

async function rotate(deps: SessionDeps, presented: string): Promise<Session> {
  const now = deps.clock.now();
  const hash = sha256Hex(presented);
  const row = await findSessionToken(deps.db, hash);
  if (!row || row.expires_at.getTime() <= now.getTime()) throw invalidRefresh('invalid');
  const profile = await loadProfile(deps.db, row.account_id);
  if (!profile?.account.active || profile.account.disabled) throw invalidRefresh('invalid');

  const graceMs = deps.config.REFRESH_TOKEN_REUSE_INTERVAL * 1000;
  // The successor belongs to the same sign-in: same family, same sign-in instant (never "now").
  const family = { familyId: row.family_id, signedInAt: row.signed_in_at };
  if (row.rotated_at === null) {
    // Marking the old token and storing its successor is one statement: neither happens without the other.
    const draft = draftSession(deps, row.account_id, family);
    // The app's claims before the rotation: a hook that refuses leaves the presented token as it was.
    const claims = await claimsFor(deps, deps.db, draft, profile, null);
    if (await rotateSessionToken(deps.db, hash, draft.row)) {
      const session = await completeSession(deps, draft, profile, claims);
      refreshEvent('rotated');
      return session;
    }
  }
  // Already rotated (now, by a racing request, or earlier): a sibling within the grace interval…
  const rotatedAt = row.rotated_at ?? now;
  if (now.getTime() - rotatedAt.getTime() <= graceMs) {
    const session = await issueSession(deps, row.account_id, { family, profile });
    refreshEvent('grace');
    return session;
  }
  // …otherwise someone replays an old token: end that sign-in everywhere, its access tokens included.
  await endSessionById(deps, row.family_id, undefined, deps.db, { reason: 'refresh_token_reuse' });
  throw invalidRefresh('reuse_detected');
}

/** The account and family behind a refresh token that is still valid, or undefined. */
export async function sessionOf(
  deps: SessionDeps,
  presented: string,
  db: Queryable = deps.db,
): Promise<{ accountId: string; familyId: string } | undefined> {
  const row = await findSessionToken(db, sha256Hex(presented));
  if (!row || row.expires_at.getTime() <= deps.clock.now().getTime()) return undefined;
  return { accountId: row.account_id, familyId: row.family_id };
}

/**
 * Who ended sessions and why, for the owner's security feed (a `session_ended` event in the same
 * transaction). `sessionId` and `client` describe the request that did it, when there was one.
 */
export interface EndedBy {
  readonly reason: SessionEndReason;
  readonly sessionId?: string | null;
  readonly client?: EventClient | null;
}

/** Records that the account's `sessions` ended (nothing when none did). */
async function recordEnded(
  deps: SessionDeps,
  tx: Queryable,
  accountId: string,
  sessions: string[],
  by: EndedBy,
) {
  if (sessions.length === 0) return;
  await recordEvent(deps, tx, {
    type: 'session_ended',
    accountId,
    sessionId: by.sessionId ?? null,
    client: by.client ?? null,
    details: { reason: by.reason, sessions },
  });
}

/**
 * Ends one session: its refresh tokens are deleted and its access tokens refused from now on, on every
 * instance. With `accountId`, only a session of that account. False when there was no such session.
 * `by` puts the ending in the owner's security feed (every caller in the service passes it).
 */
export async function endSessionById(
  deps: SessionDeps,
  sessionId: string,
  accountId?: string,
  db: Queryable = deps.db,
  by?: EndedBy,
): Promise<boolean> {
  const run = async (tx: Queryable) => {
    const ended = await deleteSession(tx, sessionId, accountId);
    if (ended) {
      await revoke(deps, tx, { sessionIds: [sessionId] });
      if (by) await recordEnded(deps, tx, ended.accountId, [sessionId], by);
    }
    return ended !== undefined;
  };
  return db === deps.db ? deps.db.transaction(run) : run(db);
}

/** Ends the sign-in a refresh token belongs to (its whole family); false when the token is unknown. */
export async function endSession(deps: SessionDeps, presented: string, by?: EndedBy): Promise<boolean> {
  const row = await findSessionToken(deps.db, sha256Hex(presented));
  if (!row) return false;
  // The session a logout comes from is the one it ends.
  await endSessionById(
    deps,
    row.family_id,
    undefined,
    deps.db,
    by && { ...by, sessionId: by.sessionId ?? row.family_id },
  );
  return true;
}

/**
 * What a request names as the caller's own session: the refresh token it presents, and the session its
 * verified access token names (`sid`).
 */
export interface OwnSignIn {
  readonly sessionId?: string;
  readonly refreshToken?: string;
  /** The request's client, for the security events the change records. */
  readonly client?: EventClient;
}

/**
 * The caller's own session, to keep when a security change ends the account's other sessions: the family
 * of its refresh token when that token is the account's, else the one its access token names. Undefined
 * when neither names a session of this account (a token signed before sessions had ids, with no refresh
 * cookie): then every session ends, the caller's too, rather than a guess keeping another one.
 */
export async function ownFamily(
  deps: SessionDeps,
  accountId: string,
  own: OwnSignIn,
  db: Queryable = deps.db,
): Promise<string | undefined> {
  if (own.refreshToken !== undefined) {
    const session = await sessionOf(deps, own.refreshToken, db);
    if (session?.accountId === accountId) return session.familyId;
  }
  return own.sessionId;
}

/**
 * Ends every session of an account, optionally keeping one; their access tokens are refused from now on.
 * Returns the number of sessions ended. `by` puts the ending in the owner's security feed.
 */
export async function endAllSessions(
  deps: SessionDeps,
  accountId: string,
  keepFamily?: string,
  db: Queryable = deps.db,
  by?: EndedBy,
): Promise<number> {
  const run = async (tx: Queryable) => {
    const ended = await deleteAccountSessions(tx, accountId, keepFamily);
    await revoke(deps, tx, { sessionIds: ended });
    if (by) await recordEnded(deps, tx, accountId, ended, by);
    return ended.length;
  };
  return db === deps.db ? deps.db.transaction(run) : run(db);
}

const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A session as GET /auth/sessions shows it to its owner. */
export interface SessionView {
  id: string;
  current: boolean;
  created_at: string;
  last_active_at: string;
  expires_at: string;
  sign_in_method: string | null;
  user_agent: string | null;
  ip: string | null;
}

/** The account's live sessions, newest first; `currentId` (the caller's own) is marked. */
export async function listSessions(
  deps: SessionDeps,
  accountId: string,
  currentId: string | undefined,
): Promise<SessionView[]> {
  const rows = await listAccountSessions(deps.db, accountId, deps.clock.now());
  return rows.map((r) => ({
    id: r.id,
    current: r.id === currentId,
    created_at: r.created_at.toISOString(),
    last_active_at: r.last_active_at.toISOString(),
    expires_at: r.expires_at.toISOString(),
    sign_in_method: r.sign_in_method,
    user_agent: r.user_agent,
    ip: r.ip,
  }));
}

/**
 * Ends one of the account's sessions. Another account's, an unknown and a malformed id all answer
 * SESSION_NOT_FOUND (404), never 403: the ids of others' sessions are not confirmed.
 */
export async function endOwnSession(
  deps: SessionDeps,
  accountId: string,
  sessionId: string,
  own: OwnSignIn = {},
): Promise<void> {
  const by: EndedBy = { reason: 'ended_by_owner', sessionId: own.sessionId, client: own.client };
  if (
    !SESSION_ID.test(sessionId) ||
    !(await endSessionById(deps, sessionId.toLowerCase(), accountId, deps.db, by))
  )
    throw new AppError('SESSION_NOT_FOUND');
}

/** The feed's description of a change made by the caller `own`, ending sessions for `reason`. */
export function endedBy(reason: SessionEndReason, own: OwnSignIn | undefined): EndedBy {
  return { reason, sessionId: own?.sessionId ?? null, client: own?.client ?? null };
}

/** The longest user agent kept with a session or an event: a client can send kilobytes, a list shows a line. */
export function clampUserAgent(ua: string | null): string | null {
  return ua === null ? null : ua.slice(0, 512);
}
