/**
 * The durable email outbox: the service's MailPort (port.ts). `send` writes a message to auth.email_outbox
 * in the flow's transaction; the sender of each instance delivers it after the commit through the mailer
 * (SMTP or the development outbox folder), retrying with growing delays until EMAIL_MAX_ATTEMPTS.
 *
 * - Prompt: a commit that queued an email wakes this instance's sender at once (afterCommit); every
 *   instance also looks for due rows every EMAIL_POLL_INTERVAL_MS (retries, and rows an instance that
 *   stopped left behind). PGlite is one process, so there the wake-up alone does it.
 * - Once: a sender claims rows with `FOR UPDATE SKIP LOCKED` and a short lease (EMAIL_CLAIM_TIMEOUT_MS)
 *   that it renews while it works on them (a heartbeat every third of the lease), so instances never
 *   send the same row together, and the rows of a sender that dies are free again within one lease;
 *   only a sender that dies after handing a message to SMTP and before recording it can send it twice.
 * - Stopping: the sender claims nothing more, aborts the deliveries that have not handed their message
 *   to SMTP yet (a server that does not answer must not hold the stop) and releases their rows at once,
 *   still due, for the next start or another instance; the deliveries already handing over finish.
 * - Budgeted: every email counts against its address's budget (budget.ts); over it, none is queued.
 * - Durable: nothing waits in memory. Deferred steps (`sendLater`: lost password, resend, magic-link
 *   login, which answer before they look the address up) are rows too; a step is removed in the
 *   transaction that runs it and queues its email, so it runs once and a crash loses nothing.
 * - Recorded: `sent_at`, `attempts`, `last_error` (never a link or ticket: see `describeError`), and a
 *   given-up row is kept with its error. The message, and the link in it, is erased once sent or given up.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { afterCommit, type Database, DatabaseUnavailable, type Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { outboxEvent } from '../metrics/events.ts';
import type { EmailBudget } from './budget.ts';
import type { Mailer } from './mailer.ts';
import {
  claimDueRows,
  insertOutboxRow,
  markFailed,
  markRetry,
  markSent,
  type OutboxBacklog,
  type OutboxRow,
  outboxBacklog,
  pruneOutbox,
  releaseRow,
  renewLeases,
  takeStep,
} from './outbox-store.ts';
import type { DeferredInput, DeferredStep, MailPort, OutgoingEmail } from './port.ts';
import type { TemplateLocals, TemplateName } from './templates.ts';

/** Runs a deferred step in `tx`, the transaction that removes it; emails it sends go in `tx` too. */
export type StepHandler = (tx: Queryable, input: DeferredInput) => Promise<void>;

/**
 * How the sender delivers rows of another kind than emails and deferred steps (webhooks: webhooks/):
 * the same claims, leases, releases and records, with the kind's own transport and retry policy.
 */
export interface Deliverer {
  /** What a row is called in logs ("webhook"). */
  readonly noun: string;
  /** Attempts before a row is given up, and the delays between them (as retryDelay computes them). */
  readonly maxAttempts: number;
  readonly retryDelayMs: number;
  readonly retryMaxDelayMs: number;
  /**
   * Delivers `row`; rejects to have it retried. `onHanded` says the message has left (from then on a
   * stop lets the delivery finish rather than release the row); `signal` aborts a delivery not handed yet.
   */
  deliver(row: OutboxRow, opts: { signal: AbortSignal; onHanded(): void }): Promise<void>;
}

export interface OutboxOptions {
  config: Config;
  db: Database;
  mailer: Mailer;
  log: FastifyBaseLogger;
  /**
   * Runs a pass of the sender in the background (the context's BackgroundTasks, so that waiting for
   * them, in tests and at shutdown, includes the deliveries in progress).
   */
  later(label: string, task: () => Promise<void>): void;
  /** The per-address budget every email is counted against; none: unlimited (rate limits off). */
  budget?: EmailBudget | undefined;
}

/** A row this sender holds, and how to stop its delivery while nothing has left the service. */
interface Held {
  abort: AbortController;
  /** The transport has started handing the message over: the delivery must run to its end. */
  handed: boolean;
}

/** How often a sender deletes old rows, at most. */
const PRUNE_EVERY_MS = 10 * 60_000;
/** The longest `last_error` kept. */
const ERROR_MAX = 300;

export class EmailOutbox implements MailPort {
  readonly sends: boolean;
  /** This sender's name in `claimed_by`: random per start, so a restarted instance is another sender. */
  readonly senderId = `sender-${randomBytes(8).toString('hex')}`;
  private readonly steps = new Map<DeferredStep, StepHandler>();
  private readonly deliverers = new Map<string, Deliverer>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private closed = false;
  private lastPrune = 0;
  /** The rows this sender has claimed and not yet recorded, by id. */
  private readonly held = new Map<string, Held>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly opts: OutboxOptions) {
    this.sends = opts.mailer.sends;
  }

  async send(tx: Queryable, email: OutgoingEmail): Promise<void> {
    if (!this.sends) throw new AppError('EMAILS_DISABLED');
    // Over its address's budget the email is dropped here, and the flow answers as it would have.
    if (this.opts.budget && !(await this.opts.budget.allow(email.to, email.template))) return;
    await insertOutboxRow(tx, {
      kind: 'email',
      template: email.template,
      recipient: email.to,
      message: { locals: email.locals, ...(email.headers ? { headers: email.headers } : {}) },
      expiresAt: email.expiresAt,
    });
    afterCommit(tx, () => this.wake());
  }

  async sendLater(db: Queryable, step: DeferredStep, input: DeferredInput): Promise<void> {
    if (!this.sends) throw new AppError('EMAILS_DISABLED');
    const message: Record<string, unknown> = { email: input.email };
    if (input.redirectTo !== undefined) message.redirectTo = input.redirectTo;
    if (input.createUser !== undefined) message.createUser = input.createUser;
    await insertOutboxRow(db, { kind: step, message });
    afterCommit(db, () => this.wake());
  }

  /** Says how to run `step` (the composition root wires auth's flows here). */
  handle(step: DeferredStep, handler: StepHandler): void {
    this.steps.set(step, handler);
  }

  /** Says how to deliver rows of `kind` (the composition root wires webhooks here). */
  deliver(kind: string, deliverer: Deliverer): void {
    this.deliverers.set(kind, deliverer);
  }

  /** Starts the sender: a pass now (rows left from before this start) and one every poll interval. */
  start(): void {
    // With emails off, the sender still runs for the other kinds (webhooks).
    if ((!this.sends && this.deliverers.size === 0) || this.closed || this.timer) return;
    this.timer = setInterval(() => this.wake(), this.opts.config.EMAIL_POLL_INTERVAL_MS);
    this.timer.unref();
    this.wake();
  }

  /**
   * Stops the sender: nothing new is claimed, and deliveries that have not handed their message over are
   * aborted (their rows are released by the pass that runs them; the context waits for its tasks). The
   * heartbeat goes on while deliveries already handing over finish.
   */
  stop(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const h of this.held.values()) if (!h.handed) h.abort.abort();
  }

  /** Rows waiting and given up, for metrics. */
  backlog(): Promise<OutboxBacklog> {
    return outboxBacklog(this.opts.db);
  }

  /** Asks for a pass now; when one is running, it goes round once more. */
  wake(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.opts.later('email-outbox', () => this.pass());
  }

  private async pass(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.drain();
      } while (this.again && !this.closed);
      await this.maybePrune();
    } catch (err) {
      // The next poll tries again. An outage of the database is logged once by its watcher
      // (db/availability.ts), not at every poll here.
      if (!(err instanceof DatabaseUnavailable))
        this.opts.log.warn({ err }, 'the email outbox could not be read; retrying at the next poll');
    } finally {
      this.running = false;
      if (this.again && !this.closed) this.wake();
    }
  }

  /** Claims and handles due rows until none is left. */
  private async drain(): Promise<void> {
    const { config, db } = this.opts;
    for (;;) {
      if (this.closed) return;
      const rows = await claimDueRows(
        db,
        this.senderId,
        config.EMAIL_CLAIM_TIMEOUT_MS,
        config.EMAIL_SEND_CONCURRENCY,
      );
      if (rows.length === 0) return;
      await Promise.all(rows.map((row) => this.handleRow(row)));
    }
  }

  /** Holds `row` until it is recorded; the heartbeat runs while this sender holds any row. */
  private hold(row: OutboxRow): Held {
    const held: Held = { abort: new AbortController(), handed: false };
    // Claimed by a query that ended after the stop: released at once, like a delivery not handed over.
    if (this.closed) held.abort.abort();
    this.held.set(row.id, held);
    if (!this.heartbeat) {
      const leaseMs = this.opts.config.EMAIL_CLAIM_TIMEOUT_MS;
      this.heartbeat = setInterval(() => void this.renew(), Math.max(100, Math.floor(leaseMs / 3)));
      this.heartbeat.unref();
    }
    return held;
  }

  private unhold(row: OutboxRow): void {
    this.held.delete(row.id);
    if (this.held.size === 0 && this.heartbeat) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }

  private async renew(): Promise<void> {
    try {
      await renewLeases(this.opts.db, this.senderId, this.opts.config.EMAIL_CLAIM_TIMEOUT_MS);
    } catch (err) {
      // The next beat tries again; two more misses and another sender may take the rows over.
      if (!(err instanceof DatabaseUnavailable))
        this.opts.log.warn({ err }, 'the email outbox could not renew its leases');
    }
  }

  private async handleRow(row: OutboxRow): Promise<void> {
    const held = this.hold(row);
    try {
      if (held.abort.signal.aborted) await this.release(row);
      else await this.deliverRow(row, held);
    } finally {
      this.unhold(row);
    }
  }

  /** Gives a row back unsent and uncounted (see releaseRow). */
  private async release(row: OutboxRow): Promise<void> {
    if (await releaseRow(this.opts.db, row.id, this.senderId))
      this.opts.log.info(
        { outboxId: row.id, template: row.template ?? row.kind },
        'stopping: email released unsent, for the next start or another instance',
      );
  }

  private async deliverRow(row: OutboxRow, held: Held): Promise<void> {
    const { db, log } = this.opts;
    const secrets = secretsOf(row);
    try {
      const deliverer = this.deliverers.get(row.kind);
      if (deliverer) {
        const handed = () => {
          held.handed = true;
        };
        await deliverer.deliver(row, { signal: held.abort.signal, onHanded: handed });
        if (!(await markSent(db, row.id, this.senderId)))
          log.warn(
            { outboxId: row.id, kind: row.kind },
            `a ${deliverer.noun} was delivered after its lease was lost: it may be delivered twice`,
          );
        return;
      }
      if (row.kind === 'email') {
        if (row.expired) {
          await markFailed(db, row.id, this.senderId, 'the link expired before the email could be sent');
          outboxEvent('given_up', row.template ?? 'unknown', row.kind);
          log.error({ outboxId: row.id, template: row.template }, 'email given up: its link expired unsent');
          return;
        }
        await this.opts.mailer.deliver(emailOf(row), {
          signal: held.abort.signal,
          onHanded: () => {
            held.handed = true;
          },
        });
        if (!(await markSent(db, row.id, this.senderId)))
          log.warn(
            { outboxId: row.id, template: row.template },
            'an email was delivered after its lease was lost (its renewals failed for longer than EMAIL_CLAIM_TIMEOUT_MS): it may go out twice',
          );
        return;
      }
      await this.runStep(row);
    } catch (err) {
      if (held.abort.signal.aborted && !held.handed) await this.release(row);
      else await this.recordFailure(row, describeError(err, secrets));
    }
  }

  private async runStep(row: OutboxRow): Promise<void> {
    const handler = this.steps.get(row.kind as DeferredStep);
    if (!handler) throw new Error(`no handler for the deferred step "${row.kind}"`);
    const input = (row.message ?? {}) as { email?: unknown; redirectTo?: unknown; createUser?: unknown };
    if (typeof input.email !== 'string') throw new Error('the deferred step has no address');
    const stepInput: DeferredInput = { email: input.email };
    if (typeof input.redirectTo === 'string') stepInput.redirectTo = input.redirectTo;
    if (typeof input.createUser === 'boolean') stepInput.createUser = input.createUser;
    await this.opts.db.transaction(async (tx) => {
      // Another sender took the row over (our lease ran out): it runs the step, not us.
      if (!(await takeStep(tx, row.id, this.senderId))) return;
      await handler(tx, stepInput);
    });
  }

  private async recordFailure(row: OutboxRow, error: string): Promise<void> {
    const { config, db, log } = this.opts;
    const label = row.template ?? row.kind;
    const deliverer = this.deliverers.get(row.kind);
    const noun = deliverer?.noun ?? 'email';
    const policy = deliverer
      ? { EMAIL_RETRY_DELAY_MS: deliverer.retryDelayMs, EMAIL_RETRY_MAX_DELAY_MS: deliverer.retryMaxDelayMs }
      : config;
    if (row.attempts >= (deliverer?.maxAttempts ?? config.EMAIL_MAX_ATTEMPTS)) {
      await markFailed(db, row.id, this.senderId, error);
      outboxEvent('given_up', label, row.kind);
      log.error(
        { outboxId: row.id, template: label, attempts: row.attempts, error },
        `${noun} given up after ${row.attempts} attempts`,
      );
      return;
    }
    const delay = retryDelay(policy, row.attempts);
    await markRetry(db, row.id, this.senderId, delay, error);
    outboxEvent('retry', label, row.kind);
    log.warn(
      { outboxId: row.id, template: label, attempts: row.attempts, retryInMs: delay, error },
      `${noun} not sent yet; it will be retried`,
    );
  }

  private async maybePrune(): Promise<void> {
    const now = Date.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    const { config, db } = this.opts;
    await pruneOutbox(db, config.EMAIL_SENT_RETENTION_HOURS, config.EMAIL_FAILED_RETENTION_HOURS);
  }
}

/** The wait before the attempt after `attempts`: doubling from EMAIL_RETRY_DELAY_MS, capped, ±20 %. */
export function retryDelay(
  config: Pick<Config, 'EMAIL_RETRY_DELAY_MS' | 'EMAIL_RETRY_MAX_DELAY_MS'>,
  attempts: number,
  random = Math.random(),
): number {
  const base = Math.min(
    config.EMAIL_RETRY_MAX_DELAY_MS,
    config.EMAIL_RETRY_DELAY_MS * 2 ** Math.min(Math.max(attempts - 1, 0), 30),
  );
  // Jitter, so that the emails an outage held back do not all come back at the same instant.
  return Math.max(1, Math.round(base * (0.8 + 0.4 * random)));
}

function emailOf(row: OutboxRow): OutgoingEmail {
  const message = (row.message ?? {}) as { locals?: TemplateLocals; headers?: Record<string, string> };
  return {
    to: row.recipient as string,
    template: row.template as TemplateName,
    locals: message.locals ?? ({} as TemplateLocals),
    headers: message.headers,
  };
}

/** The values of a row that must never reach `last_error` or a log: its link, ticket and token. */
function secretsOf(row: OutboxRow): string[] {
  const message = (row.message ?? {}) as {
    locals?: Record<string, unknown>;
    headers?: Record<string, unknown>;
  };
  const values = [
    message.locals?.link,
    message.locals?.ticket,
    message.locals?.token,
    ...Object.values(message.headers ?? {}),
  ];
  const secrets = values.filter((v): v is string => typeof v === 'string' && v.length >= 8);
  // A one-time code is short, yet a secret all the same.
  const code = message.locals?.code;
  return typeof code === 'string' ? [...secrets, code] : secrets;
}

/**
 * What went wrong, for `last_error` and the logs: the transport's error code and first line, with any
 * secret of the message cut out (an SMTP server may echo a header back) and bounded in length.
 */
export function describeError(err: unknown, secrets: string[]): string {
  let e = err as { cause?: unknown; code?: unknown; responseCode?: unknown; message?: unknown };
  // DeliveryError wraps the transport's error.
  if (e?.cause && (e as Error).name === 'DeliveryError') e = e.cause as typeof e;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const first = String(e?.message ?? e ?? 'unknown error').split('\n')[0] as string;
  let text = code && !first.includes(code) ? `${code}: ${first}` : first;
  for (const s of secrets) text = text.split(s).join('[redacted]');
  return text.length > ERROR_MAX ? `${text.slice(0, ERROR_MAX - 1)}…` : text;
}
