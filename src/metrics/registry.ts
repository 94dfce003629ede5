/**
 * The Prometheus metrics of one app: a registry of its own (never prom-client's global one), the
 * counters the events of events.ts feed, and gauges read from the live parts (hashing pool, database
 * pool, image queue) when a scrape asks. Names follow Prometheus' conventions: `gatehouse_` prefix,
 * `_total` for counters, base units (seconds). docs/operations.md lists them with sample alerts.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { PoolStats } from '../db/database.ts';
import {
  channels,
  type EmailEvent,
  type EmailOverBudgetEvent,
  type HashWaitEvent,
  type OutboxEvent,
  type RefreshEvent,
  type SignInEvent,
} from './events.ts';

/** The live parts whose state the gauges read at scrape time. */
export interface MetricsSources {
  /** The instance's password hashing threads. */
  passwords: { stats(): { waiting: number; running: number } };
  /** The email outbox's backlog, read from the database at scrape time. */
  outbox?: {
    backlog(): Promise<{
      pending: number;
      oldestSeconds: number;
      failed: number;
      webhooksPending: number;
      webhooksFailed: number;
    }>;
  };
  /** PostgreSQL pool figures; absent for PGlite. */
  poolStats?: () => PoolStats;
  /** The revoked list of access tokens (auth/revocations.ts). */
  revocations?: {
    stats(): { size: number; trusted: boolean; lastLagMs: number | undefined };
  };
  /** The image transform queue and its counters, when storage is on. */
  images?: {
    readonly queue: { readonly stats: { running: number; waiting: number } };
    readonly stats: { readonly renders: number; readonly cacheHits: number; readonly failureHits: number };
    /** Renders stopped by IMAGE_TIMEOUT, both lanes together. */
    readonly timeouts: number;
  };
}

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly latency: Histogram<'method' | 'route' | 'status'>;
  private readonly unsubscribers: (() => void)[] = [];
  /** Reads what the gauges cannot read synchronously (the outbox backlog), before each scrape. */
  private beforeCollect: () => Promise<void> = async () => {};

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    this.requests = new Counter({
      name: 'gatehouse_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'gatehouse_http_request_duration_seconds',
      help: 'Time from the request to its answer, by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: SECONDS_BUCKETS,
      registers,
    });

    const signIns = new Counter({
      name: 'gatehouse_sign_ins_total',
      help: 'Sign-in attempts by method (password, mfa, magic_link, anonymous, provider, passkey) and outcome (success, mfa_required, wrong_password, locked, not_activated, disabled, invalid_code, refused, cloned).',
      labelNames: ['method', 'outcome'],
      registers,
    });
    this.on(channels.signIn.name, (e: SignInEvent) => signIns.inc({ method: e.method, outcome: e.outcome }));

    const refreshes = new Counter({
      name: 'gatehouse_token_refreshes_total',
      help: 'Refresh-token uses by outcome (rotated, grace, reuse_detected, invalid).',
      labelNames: ['outcome'],
      registers,
    });
    this.on(channels.refresh.name, (e: RefreshEvent) => refreshes.inc({ outcome: e.outcome }));

    const emails = new Counter({
      name: 'gatehouse_emails_total',
      help: 'Delivery attempts of emails by the transport (smtp, or the development outbox), by outcome (sent, failed) and template.',
      labelNames: ['outcome', 'mode', 'template'],
      registers,
    });
    this.on(channels.email.name, (e: EmailEvent) =>
      emails.inc({ outcome: e.outcome, mode: e.mode, template: e.template }),
    );

    const outboxAttempts = new Counter({
      name: 'gatehouse_email_outbox_failures_total',
      help: 'Failed delivery attempts of the email outbox, by what follows (retry: tried again later; given_up: EMAIL_MAX_ATTEMPTS reached, or the link expired unsent) and template (or deferred step).',
      labelNames: ['outcome', 'template'],
      registers,
    });
    const webhookFailures = new Counter({
      name: 'gatehouse_webhook_failures_total',
      help: 'Failed webhook delivery attempts, by what follows (retry: tried again later; given_up: WEBHOOK_MAX_ATTEMPTS reached) and event type.',
      labelNames: ['outcome', 'type'],
      registers,
    });
    this.on(channels.outbox.name, (e: OutboxEvent) => {
      if (e.kind === 'webhook') webhookFailures.inc({ outcome: e.outcome, type: e.template });
      else outboxAttempts.inc({ outcome: e.outcome, template: e.template });
    });
    const overBudget = new Counter({
      name: 'gatehouse_emails_over_budget_total',
      help: 'Emails not queued because their address had used up its budget (RATE_LIMIT_EMAIL_ADDRESS_MAX), by template.',
      labelNames: ['template'],
      registers,
    });
    this.on(channels.emailOverBudget.name, (e: EmailOverBudgetEvent) =>
      overBudget.inc({ template: e.template }),
    );
    const { outbox } = sources;
    if (outbox) {
      // Read by `text()` before the registry collects (one query per scrape, finished before the pool
      // gauges look at the pool); when the database cannot answer, the gauges keep their last values.
      const backlog = { pending: 0, oldestSeconds: 0, failed: 0, webhooksPending: 0, webhooksFailed: 0 };
      this.beforeCollect = async () => {
        try {
          Object.assign(backlog, await outbox.backlog());
        } catch {
          // The scrape still succeeds.
        }
      };
      new Gauge({
        name: 'gatehouse_email_outbox_pending',
        help: 'Emails (and deferred steps) in the outbox waiting to be sent, across every instance.',
        registers,
        collect() {
          this.set(backlog.pending);
        },
      });
      new Gauge({
        name: 'gatehouse_email_outbox_oldest_pending_seconds',
        help: 'Age of the oldest email waiting in the outbox, in seconds (0 when none waits).',
        registers,
        collect() {
          this.set(backlog.oldestSeconds);
        },
      });
      new Gauge({
        name: 'gatehouse_webhooks_pending',
        help: 'Webhook deliveries waiting to be delivered (or retried), across every instance.',
        registers,
        collect() {
          this.set(backlog.webhooksPending);
        },
      });
      new Gauge({
        name: 'gatehouse_webhooks_given_up',
        help: 'Webhook deliveries given up and still kept with their error (`gatehouse webhooks list-failed`).',
        registers,
        collect() {
          this.set(backlog.webhooksFailed);
        },
      });
      new Gauge({
        name: 'gatehouse_email_outbox_given_up',
        help: 'Emails given up and still kept in the outbox with their error (EMAIL_FAILED_RETENTION_HOURS).',
        registers,
        collect() {
          this.set(backlog.failed);
        },
      });
    }

    const storeErrors = new Counter({
      name: 'gatehouse_object_store_errors_total',
      help: 'Object-store operations that failed because the store could not answer (each answered 503).',
      registers,
    });
    this.on(channels.objectStoreError.name, () => storeErrors.inc());

    const hashWait = new Histogram({
      name: 'gatehouse_password_hash_wait_seconds',
      help: 'Time password hashing jobs waited for a hashing thread.',
      buckets: [0.001, ...SECONDS_BUCKETS],
      registers,
    });
    this.on(channels.hashWait.name, (e: HashWaitEvent) => hashWait.observe(e.waitSeconds));
    const hashRefused = new Counter({
      name: 'gatehouse_password_hash_refused_total',
      help: 'Password hashing jobs refused because the waiting line was full (503 PASSWORD_HASHING_BUSY).',
      registers,
    });
    this.on(channels.hashRefused.name, () => hashRefused.inc());
    new Gauge({
      name: 'gatehouse_password_hash_jobs',
      help: 'Password hashing jobs now, by state (waiting for a thread, running).',
      labelNames: ['state'],
      registers,
      collect() {
        const s = sources.passwords.stats();
        this.set({ state: 'waiting' }, s.waiting);
        this.set({ state: 'running' }, s.running);
      },
    });

    const { poolStats, images, revocations } = sources;
    if (revocations) {
      new Gauge({
        name: 'gatehouse_revoked_list_entries',
        help: 'Entries in the in-memory list of revoked access tokens: ended sessions plus users whose earlier tokens are void.',
        registers,
        collect() {
          this.set(revocations.stats().size);
        },
      });
      new Gauge({
        name: 'gatehouse_revoked_list_trusted',
        help: '1 while the revoked list is current (listening for revocations); 0 after the notification connection dropped, until it listens again and has reloaded (tokens are then checked against the database).',
        registers,
        collect() {
          this.set(revocations.stats().trusted ? 1 : 0);
        },
      });
      new Gauge({
        name: 'gatehouse_revocation_notification_lag_seconds',
        help: 'How late the last revocation notification arrived, from the revoking instance to this one, in seconds.',
        registers,
        collect() {
          const lag = revocations.stats().lastLagMs;
          if (lag !== undefined) this.set(lag / 1000);
        },
      });
    }
    if (poolStats) {
      new Gauge({
        name: 'gatehouse_db_pool_connections',
        help: 'PostgreSQL pool connections by state (in_use, idle), and queries waiting for one (waiting).',
        labelNames: ['state'],
        registers,
        collect() {
          const s = poolStats();
          this.set({ state: 'in_use' }, s.total - s.idle);
          this.set({ state: 'idle' }, s.idle);
          this.set({ state: 'waiting' }, s.waiting);
        },
      });
      new Gauge({
        name: 'gatehouse_db_pool_max_connections',
        help: 'Largest size of the PostgreSQL pool (DATABASE_POOL_SIZE).',
        registers,
        collect() {
          this.set(poolStats().max);
        },
      });
    }
    if (images) {
      new Gauge({
        name: 'gatehouse_image_transforms',
        help: 'Image transforms now, by state (running, waiting for a turn).',
        labelNames: ['state'],
        registers,
        collect() {
          const s = images.queue.stats;
          this.set({ state: 'running' }, s.running);
          this.set({ state: 'waiting' }, s.waiting);
        },
      });
      const counted = { renders: 0, cacheHits: 0, failureHits: 0, timeouts: 0 };
      new Counter({
        name: 'gatehouse_image_renders_total',
        help: 'Image variants rendered (cache misses).',
        registers,
        collect() {
          this.inc(images.stats.renders - counted.renders);
          counted.renders = images.stats.renders;
        },
      });
      new Counter({
        name: 'gatehouse_image_render_timeouts_total',
        help: 'Image renders stopped at IMAGE_TIMEOUT (their render process killed).',
        registers,
        collect() {
          this.inc(images.timeouts - counted.timeouts);
          counted.timeouts = images.timeouts;
        },
      });
      new Counter({
        name: 'gatehouse_image_remembered_failures_total',
        help: 'Image transforms answered at once with a remembered failure (IMAGE_FAILURE_TTL).',
        registers,
        collect() {
          this.inc(images.stats.failureHits - counted.failureHits);
          counted.failureHits = images.stats.failureHits;
        },
      });
      new Counter({
        name: 'gatehouse_image_cache_hits_total',
        help: 'Image variants answered from the local cache.',
        registers,
        collect() {
          this.inc(images.stats.cacheHits - counted.cacheHits);
          counted.cacheHits = images.stats.cacheHits;
        },
      });
    }
  }

  /** Counts one answered request; `route` is the route pattern (never the raw URL, which would name files). */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.requests.inc(labels);
    this.latency.observe(labels, seconds);
  }

  /** The exposition text of every metric. */
  async text(): Promise<string> {
    await this.beforeCollect();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Stops listening to events (the app is closing). */
  close(): void {
    for (const off of this.unsubscribers.splice(0)) off();
  }

  private on<E>(name: string | symbol, fn: (event: E) => void): void {
    const listener = (message: unknown) => fn(message as E);
    subscribe(name, listener);
    this.unsubscribers.push(() => unsubscribe(name, listener));
  }
}
