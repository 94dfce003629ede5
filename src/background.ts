/**
 * Work that runs after the response, in memory: a crash loses it, so it holds nothing that must survive
 * one (the email outbox runs its sender's passes here; what they work on is in the database). The context
 * drains the tasks before it closes the database and the mailer they use; tests wait for them.
 */
import type { FastifyBaseLogger } from 'fastify';

export interface BackgroundTasks {
  /** Runs `task` without waiting for it; a failure is logged (the task itself undoes its writes). */
  later(label: string, task: () => Promise<void>): void;
  /** Resolves when every task started by `later` has finished (tests, shutdown). */
  idle(): Promise<void>;
}

export function backgroundTasks(log: FastifyBaseLogger): BackgroundTasks {
  const running = new Set<Promise<void>>();
  return {
    later(label, task) {
      const p = (async () => {
        try {
          await task();
        } catch (err) {
          log.error({ err, task: label }, `background task "${label}" failed`);
        }
      })();
      running.add(p);
      void p.finally(() => running.delete(p));
    },
    async idle() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}
