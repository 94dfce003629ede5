/**
 * Work that runs after the response, in memory: a crash loses it, so it holds nothing that must survive
 * one (the email outbox runs its sender's passes here; what they work on is in the database). The context
 * drains the tasks before it closes the database and the mailer they use; tests wait for them. Periodic
 * housekeeping (deleting security events past their retention) runs here too, every so often, and stops
 * with the context.
 */
import type { FastifyBaseLogger } from 'fastify';

export interface BackgroundTasks {
  /** Runs `task` without waiting for it; a failure is logged (the task itself undoes its writes). */
  later(label: string, task: () => Promise<void>): void;
  /** Resolves when every task started by `later` has finished (tests, shutdown). */
  idle(): Promise<void>;
  /** Runs `task` every `intervalMs` (first after one interval), as a `later` task, until stop(). */
  every(label: string, intervalMs: number, task: () => Promise<void>): void;
  /** Stops the periodic tasks (the running ones finish; idle() waits for them). */
  stop(): void;
}

export function backgroundTasks(log: FastifyBaseLogger): BackgroundTasks {
  const running = new Set<Promise<void>>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (label: string, task: () => Promise<void>) => {
    const p = (async () => {
      try {
        await task();
      } catch (err) {
        log.error({ err, task: label }, `background task "${label}" failed`);
      }
    })();
    running.add(p);
    void p.finally(() => running.delete(p));
  };
  return {
    later,
    every(label, intervalMs, task) {
      const timer = setInterval(() => later(label, task), intervalMs);
      timer.unref();
      timers.add(timer);
    },
    stop() {
      for (const t of timers) clearInterval(t);
      timers.clear();
    },
    async idle() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}
