/**
 * Logs a dependency's outage once when it begins and once when it ends, instead of once per failed
 * request: a busy service would otherwise write thousands of identical lines while PostgreSQL restarts
 * or Redis is away, and bury the one line that says when it started. Callers report every outcome:
 * `failed` for a failure that means "unavailable", `succeeded` for any answer.
 */
import type { FastifyBaseLogger } from 'fastify';

export class Outage {
  private since: number | undefined;
  private failures = 0;

  constructor(
    private readonly log: FastifyBaseLogger,
    /** Names the dependency in both lines, e.g. `database`, `rate-limit store`. */
    private readonly what: string,
    /** What the service does meanwhile, for the operator reading the first line. */
    private readonly meanwhile: string,
    private readonly level: 'error' | 'warn' = 'error',
  ) {}

  /** True from the first failure until the next success. */
  get down(): boolean {
    return this.since !== undefined;
  }

  failed(fields: Record<string, unknown>): void {
    this.failures += 1;
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.log[this.level](fields, `${this.what} unavailable: ${this.meanwhile}`);
  }

  succeeded(fields: Record<string, unknown> = {}): void {
    if (this.since === undefined) return;
    this.log.info(
      { ...fields, downForMs: Date.now() - this.since, failures: this.failures },
      `${this.what} available again`,
    );
    this.since = undefined;
    this.failures = 0;
  }
}
