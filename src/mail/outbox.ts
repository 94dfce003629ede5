/**
 * The durable email outbox: the service's MailPort (port.ts). `send` writes a message to auth.email_outbox
 * in the flow's transaction; the sender of each instance delivers it after the commit through the mailer
 * (SMTP or the development outbox folder), retrying with growing delays until EMAIL_MAX_ATTEMPTS.
 *
 * - Prompt: a commit that queued an email wakes this instance's sender at once (afterCommit); every
 *   instance also looks for due rows every EMAIL_POLL_INTERVAL_MS (retries, and rows an instance that
 *   stopped left behind). PGlite is one process, so there the wake-up alone does it.
 * - Once: a sender claims rows with `FOR UPDATE SKIP LOCKED` and a lease (EMAIL_CLAIM_TIMEOUT_MS), so
 *   instances never send the same row together; a sender that dies mid-delivery leaves its rows to be
 *   claimed again when the lease runs out (then, and only then, a message can go out twice).
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
  takeStep,
} from './outbox-store.ts';
import type { DeferredInput, DeferredStep, MailPort, OutgoingEmail } from './port.ts';
import type { TemplateLocals, TemplateName } from './templates.ts';

/** Runs a deferred step in `tx`, the transaction that removes it; emails it sends go in `tx` too. */
export type StepHandler = (tx: Queryable, input: DeferredInput) => Promise<void>;

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
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private closed = false;
  private lastPrune = 0;

  constructor(private readonly opts: OutboxOptions) {
    this.sends = opts.mailer.sends;
  }

  async send(tx: Queryable, email: OutgoingEmail): Promise<void> {
    if (!this.sends) throw new AppError('EMAILS_DISABLED');
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
    await insertOutboxRow(db, { kind: step, message });
    afterCommit(db, () => this.wake());
  }

  /** Says how to run `step` (the composition root wires auth's flows here). */
  handle(step: DeferredStep, handler: StepHandler): void {
    this.steps.set(step, handler);
  }

  /** Starts the sender: a pass now (rows left from before this start) and one every poll interval. */
  start(): void {
    if (!this.sends || this.closed || this.timer) return;
    this.timer = setInterval(() => this.wake(), this.opts.config.EMAIL_POLL_INTERVAL_MS);
    this.timer.unref();
    this.wake();
  }

  /** Stops waking the sender; a pass in progress finishes (the context waits for its tasks). */
  stop(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
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

  private async handleRow(row: OutboxRow): Promise<void> {
    const { db, log } = this.opts;
    const secrets = secretsOf(row);
    try {
      if (row.kind === 'email') {
        if (row.expired) {
          await markFailed(db, row.id, this.senderId, 'the link expired before the email could be sent');
          outboxEvent('given_up', row.template ?? 'unknown');
          log.error({ outboxId: row.id, template: row.template }, 'email given up: its link expired unsent');
          return;
        }
        await this.opts.mailer.deliver(emailOf(row));
        if (!(await markSent(db, row.id, this.senderId)))
          log.warn(
            { outboxId: row.id, template: row.template },
            'an email was delivered after its claim ran out (EMAIL_CLAIM_TIMEOUT_MS too short?): it may go out twice',
          );
        return;
      }
      await this.runStep(row);
    } catch (err) {
      await this.recordFailure(row, describeError(err, secrets));
    }
  }

  private async runStep(row: OutboxRow): Promise<void> {
    const handler = this.steps.get(row.kind as DeferredStep);
    if (!handler) throw new Error(`no handler for the deferred step "${row.kind}"`);
    const input = (row.message ?? {}) as { email?: unknown; redirectTo?: unknown };
    if (typeof input.email !== 'string') throw new Error('the deferred step has no address');
    const stepInput: DeferredInput = { email: input.email };
    if (typeof input.redirectTo === 'string') stepInput.redirectTo = input.redirectTo;
    await this.opts.db.transaction(async (tx) => {
      // Another sender took the row over (our lease ran out): it runs the step, not us.
      if (!(await takeStep(tx, row.id, this.senderId))) return;
      await handler(tx, stepInput);
    });
  }

  private async recordFailure(row: OutboxRow, error: string): Promise<void> {
    const { config, db, log } = this.opts;
    const label = row.template ?? row.kind;
    if (row.attempts >= config.EMAIL_MAX_ATTEMPTS) {
      await markFailed(db, row.id, this.senderId, error);
      outboxEvent('given_up', label);
      log.error(
        { outboxId: row.id, template: label, attempts: row.attempts, error },
        `email given up after ${row.attempts} attempts`,
      );
      return;
    }
    const delay = retryDelay(config, row.attempts);
    await markRetry(db, row.id, this.senderId, delay, error);
    outboxEvent('retry', label);
    log.warn(
      { outboxId: row.id, template: label, attempts: row.attempts, retryInMs: delay, error },
      'email not sent yet; it will be retried',
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
  return values.filter((v): v is string => typeof v === 'string' && v.length >= 8);
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
