/**
 * The revoked list: which access tokens this instance refuses before their expiry, held in memory so that
 * checking a request costs two map lookups and no database read. Entries are the ids of ended sessions
 * (every token names its session in `sid`) and, per user, an instant before which every token is void
 * (an account disabled or deleted). Each entry lives only until every token it can refuse has expired
 * (the access-token lifetime after it was made).
 *
 * Instances learn of each other's revocations through PostgreSQL LISTEN/NOTIFY (the row and the
 * notification are written in the transaction that ends the session; an instance applies its own at
 * commit without waiting for the round trip). The list is filled from auth.revocations at start, after
 * LISTEN is in force, so nothing made in between is missed. When the listening connection is lost, the
 * list stops being trusted: until the instance listens again and has reloaded the table, every token is
 * checked against the table instead (one indexed read per request; when the database is down too, the
 * request gets 503 rather than a token that may have been revoked). A connection can also die without a
 * word (a network cut with no reset, or a pooler that accepts LISTEN and never delivers): every
 * HEARTBEAT_MS the instance notifies itself, and a heartbeat not heard back within HEARTBEAT_TIMEOUT_MS
 * counts as the connection lost.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { afterCommit, type Database, type Queryable, type Subscription } from '../db/database.ts';
import type { TokenFacts } from './jwt.ts';
import {
  heartbeatNonce,
  insertRevocation,
  isRevoked,
  loadRevocations,
  notifyHeartbeat,
  parseRevocation,
  purgeRevocations,
  REVOCATIONS_CHANNEL,
  type Revocation,
} from './revocations-store.ts';

/** The in-memory list alone (no database): applies revocations and answers lookups. */
export class RevokedList {
  /** Session id → when the entry may go (ms). */
  private readonly sessions = new Map<string, number>();
  /** User id → tokens issued at or before this instant (ms) are void. */
  private readonly users = new Map<string, number>();
  /** User id → when that user's entry may go (ms). */
  private readonly usersUntil = new Map<string, number>();

  apply(r: Revocation): void {
    for (const id of r.sessionIds ?? []) {
      if ((this.sessions.get(id) ?? 0) < r.expiresAt) this.sessions.set(id, r.expiresAt);
    }
    if (r.userId !== undefined && r.issuedBefore !== undefined) {
      if ((this.users.get(r.userId) ?? -1) < r.issuedBefore) this.users.set(r.userId, r.issuedBefore);
      if ((this.usersUntil.get(r.userId) ?? 0) < r.expiresAt) this.usersUntil.set(r.userId, r.expiresAt);
    }
  }

  /**
   * Whether the token is refused. Two map lookups, nothing allocated: this runs on every request. An
   * entry past its time is harmless here (its tokens have expired anyway); prune() drops it.
   */
  refuses(userId: string, sessionId: string | undefined, issuedAtS: number): boolean {
    if (sessionId !== undefined && this.sessions.has(sessionId)) return true;
    const before = this.users.get(userId);
    return before !== undefined && issuedAtS * 1000 <= before;
  }

  /** Forgets the entries whose tokens have all expired. */
  prune(nowMs: number): void {
    for (const [id, until] of this.sessions) if (until <= nowMs) this.sessions.delete(id);
    for (const [id, until] of this.usersUntil) {
      if (until <= nowMs) {
        this.usersUntil.delete(id);
        this.users.delete(id);
      }
    }
  }

  /** Entries held: sessions plus users. */
  get size(): number {
    return this.sessions.size + this.users.size;
  }
}

/** A connection attempt whose subscription was lost while it ran: the loss has scheduled the next. */
class Superseded extends Error {}

const HEARTBEAT_MS = 30_000;
const HEARTBEAT_TIMEOUT_MS = 10_000;

/** What recording a revocation needs: the lifetime of access tokens, the time, and this instance's list. */
export interface RevocationDeps {
  readonly config: Pick<Config, 'JWT_EXPIRES_IN'>;
  readonly clock: Clock;
  /** This instance's list, to apply at commit; absent in the CLI, which has none. */
  readonly revocations?: Revocations;
}

/**
 * Records, in `db`'s transaction, that the access tokens of these sessions (and, with `user`, every
 * token of that user issued until now) are refused from now on, everywhere.
 */
export async function revoke(
  deps: RevocationDeps,
  db: Queryable,
  what: { sessionIds?: readonly string[]; userId?: string },
): Promise<void> {
  const ids = what.sessionIds ?? [];
  if (ids.length === 0 && what.userId === undefined) return;
  const now = deps.clock.now();
  // A token made just before `now` expires within one lifetime of it; a minute more covers clock skew.
  const r: Revocation = {
    at: now.getTime(),
    expiresAt: now.getTime() + (deps.config.JWT_EXPIRES_IN + 1) * 60_000,
  };
  if (ids.length > 0) r.sessionIds = [...ids];
  if (what.userId !== undefined) {
    r.userId = what.userId;
    r.issuedBefore = now.getTime();
  }
  await insertRevocation(db, r, now);
  const list = deps.revocations;
  if (list) afterCommit(db, () => list.applyLocal(r));
}

export interface RevocationsStats {
  /** Entries in the list. */
  size: number;
  /** Whether the list is trusted (listening, and loaded since). */
  trusted: boolean;
  /** Milliseconds between the last notification's revocation and its arrival here. */
  lastLagMs: number | undefined;
}

/** This instance's revoked list, kept current from the database. */
export class Revocations {
  readonly list = new RevokedList();
  private trusted = false;
  private stopped = false;
  private subscription: Subscription | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private pendingPing: { nonce: string; timer: NodeJS.Timeout; heard: (ok: boolean) => void } | undefined;
  private lastLagMs: number | undefined;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Listens, then loads the table: nothing made meanwhile is missed. When listening does not work (no
   * echo of a heartbeat), the instance starts all the same, checking tokens against the database, and
   * keeps trying in the background.
   */
  async start(): Promise<void> {
    this.pruneTimer = setInterval(() => this.housekeeping(), 60_000);
    this.pruneTimer.unref();
    this.heartbeatTimer = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    this.heartbeatTimer.unref();
    try {
      await this.connect();
    } catch (err) {
      this.log.warn({ err }, 'cannot hear revocations yet; checking tokens against the database meanwhile');
      if (!(err instanceof Superseded)) this.retry(1_000);
    }
  }

  /**
   * Notifies this instance on the channel; true once heard back, false when not within
   * HEARTBEAT_TIMEOUT_MS (or when one is already on its way, or the database cannot answer).
   */
  private echo(): Promise<boolean> {
    if (this.pendingPing) return Promise.resolve(false);
    return new Promise((resolve) => {
      const nonce = randomUUID();
      const settle = (ok: boolean) => {
        if (this.pendingPing?.nonce !== nonce) return;
        clearTimeout(this.pendingPing.timer);
        this.pendingPing = undefined;
        resolve(ok);
      };
      const timer = setTimeout(() => settle(false), HEARTBEAT_TIMEOUT_MS);
      timer.unref();
      this.pendingPing = { nonce, timer, heard: settle };
      notifyHeartbeat(this.db, nonce).catch(() => settle(false));
    });
  }

  /** The periodic heartbeat: not heard back in time, the listening connection is taken as lost. */
  heartbeat(): void {
    const sub = this.subscription;
    if (!sub || this.pendingPing || this.stopped) return;
    void this.echo().then((ok) => {
      if (ok || this.subscription !== sub) return;
      this.log.warn('a revocation heartbeat was not heard back; listening again');
      // Closing settles `lost`: onLost stops trusting the list and listens anew.
      void sub.close();
    });
  }

  private async connect(): Promise<void> {
    const sub = await this.db.listen(REVOCATIONS_CHANNEL, (payload) => this.heard(payload));
    if (this.stopped) {
      await sub.close();
      return;
    }
    this.subscription = sub;
    void sub.lost.then(() => this.onLost(sub));
    // Added to what the list holds, never replacing it: a notification heard while the table was being
    // read may be of a row that read did not see. Every entry is a real revocation; prune() ages them out.
    let rows: Revocation[];
    try {
      rows = await loadRevocations(this.db, this.clock.now());
      // Trusted only once the channel is shown to deliver (a pooler may accept LISTEN and never deliver).
      if (!(await this.echo())) throw new Error('the revocation channel did not echo a heartbeat');
    } catch (err) {
      // Lost meanwhile: onLost has already scheduled the next attempt.
      const superseded = this.subscription !== sub;
      this.subscription = undefined;
      await sub.close();
      throw superseded ? new Superseded() : err;
    }
    for (const r of rows) this.list.apply(r);
    // Lost again while loading: onLost has scheduled the next attempt; stay untrusted until it succeeds.
    if (this.subscription === sub) this.trusted = true;
  }

  private heard(payload: string): void {
    const nonce = heartbeatNonce(payload);
    if (nonce !== undefined) {
      if (this.pendingPing?.nonce === nonce) this.pendingPing.heard(true);
      return;
    }
    const r = parseRevocation(payload);
    if (!r) return;
    this.list.apply(r);
    // How late it came: from the revoking instance's clock to ours (clocks of a fleet agree closely).
    if (typeof r.at === 'number') this.lastLagMs = Math.max(0, this.clock.now().getTime() - r.at);
  }

  /** Applies a revocation of this instance at once (its notification will come back too). */
  applyLocal(r: Revocation): void {
    this.list.apply(r);
  }

  private onLost(sub: Subscription): void {
    if (this.stopped || this.subscription !== sub) return;
    this.subscription = undefined;
    this.pendingPing?.heard(false);
    this.trusted = false;
    this.log.warn(
      'lost the connection that hears revocations; checking tokens against the database until it is back',
    );
    this.retry(250);
  }

  private retry(delayMs: number): void {
    if (this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.connect().then(
        () => {
          if (this.trusted) this.log.info('hearing revocations again; the revoked list is reloaded');
        },
        (err: unknown) => {
          if (!(err instanceof Superseded)) this.retry(Math.min(delayMs * 2, 5_000));
        },
      );
    }, delayMs);
    this.retryTimer.unref();
  }

  private housekeeping(): void {
    const now = this.clock.now();
    this.list.prune(now.getTime());
    void purgeRevocations(this.db, now).catch(() => {});
  }

  /**
   * Whether a verified token is refused: from memory (no allocation) while the list is trusted, else
   * from the table.
   */
  refuses(t: TokenFacts): boolean | Promise<boolean> {
    if (this.trusted) return this.list.refuses(t.userId, t.sessionId, t.issuedAt);
    return isRevoked(
      this.db,
      { sessionId: t.sessionId, userId: t.userId, issuedAt: new Date(t.issuedAt * 1000) },
      this.clock.now(),
    );
  }

  stats(): RevocationsStats {
    return { size: this.list.size, trusted: this.trusted, lastLagMs: this.lastLagMs };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pruneTimer);
    clearInterval(this.heartbeatTimer);
    this.pendingPing?.heard(false);
    clearTimeout(this.retryTimer);
    await this.subscription?.close();
    this.subscription = undefined;
  }
}
