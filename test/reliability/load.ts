/**
 * A small concurrent load for the fault suites: `workers` loops each run `step` until `durationMs` has
 * passed, and every answer is kept so the suite can check what each request got.
 */
import type { LightMyRequestResponse } from 'fastify';

export interface Outcome {
  route: string;
  res: LightMyRequestResponse;
}

/**
 * Runs until `done(outcomes so far)` says so (checked between steps), or `maxMs` has passed: a load
 * that ends on what happened, not on a clock a loaded machine would make meaningless.
 */
export function runLoad(opts: {
  workers: number;
  maxMs: number;
  done(outcomes: readonly Outcome[]): boolean;
  step(worker: number, iteration: number): Promise<Outcome[]>;
}): { outcomes: Outcome[]; finished: Promise<Outcome[]> } {
  const until = Date.now() + opts.maxMs;
  const outcomes: Outcome[] = [];
  const finished = Promise.all(
    Array.from({ length: opts.workers }, async (_, worker) => {
      for (let i = 0; Date.now() < until && !opts.done(outcomes); i++)
        outcomes.push(...(await opts.step(worker, i)));
    }),
  ).then(() => outcomes);
  return { outcomes, finished };
}

export interface LoadSummary {
  /** Answers by status code. */
  byStatus: Record<number, number>;
  /** Every 5xx other than 503, as `route status body`. */
  serverErrors: string[];
}

export function summarise(outcomes: Outcome[]): LoadSummary {
  const byStatus: Record<number, number> = {};
  const serverErrors: string[] = [];
  for (const { route, res } of outcomes) {
    byStatus[res.statusCode] = (byStatus[res.statusCode] ?? 0) + 1;
    if (res.statusCode >= 500 && res.statusCode !== 503)
      serverErrors.push(`${route} ${res.statusCode} ${res.body.slice(0, 300)}`);
  }
  return { byStatus, serverErrors };
}
