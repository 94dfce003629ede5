/**
 * One budget of emails per address, whatever the route that asks for them: every email the outbox
 * queues (outbox.ts `send`) is counted against its recipient, RATE_LIMIT_EMAIL_ADDRESS_MAX per
 * RATE_LIMIT_EMAIL_ADDRESS_WINDOW and RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX per day. Per-route limits alone
 * let each route flood the same mailbox on its own allowance (40 registrations of a victim's address
 * sent 24 "you already have an account" emails).
 *
 * Over budget the email is simply not queued: the flow goes on and the route answers as it would have,
 * so neither the status nor the body says whether an email went out (or whether the address has an
 * account). The counters are the rate limits' (memory, or Redis with REDIS_URL), keyed by a hash of the
 * address; the log line carries that hash and the domain, never the address.
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { emailOverBudgetEvent } from '../metrics/events.ts';

/** The part of a rate-limit counter store the budget uses (http/counters.ts implements it). */
export interface BudgetCounter {
  increment(key: string, windowMs: number): Promise<{ count: number }>;
}

export interface EmailBudget {
  /** Counts one email to `address`; false when it is over the budget and must not be queued. */
  allow(address: string, template: string): Promise<boolean>;
}

const DAY_MS = 24 * 60 * 60_000;

/** A hash of the address (trimmed, lower-cased): counter key and log field, never the address itself. */
export function addressHash(address: string): string {
  return createHash('sha256').update(address.trim().toLowerCase()).digest('hex').slice(0, 32);
}

export function addressBudget(
  counter: BudgetCounter,
  config: Pick<
    Config,
    'RATE_LIMIT_EMAIL_ADDRESS_MAX' | 'RATE_LIMIT_EMAIL_ADDRESS_WINDOW' | 'RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX'
  >,
  log: FastifyBaseLogger,
): EmailBudget {
  return {
    async allow(address, template) {
      const hash = addressHash(address);
      let within: boolean;
      try {
        // The day counts only the emails its window let through: refusals beyond a window do not use up
        // the rest of the day for the address's owner.
        const window = await counter.increment(
          `email-address:${hash}`,
          config.RATE_LIMIT_EMAIL_ADDRESS_WINDOW,
        );
        within =
          window.count <= config.RATE_LIMIT_EMAIL_ADDRESS_MAX &&
          (await counter.increment(`email-address-day:${hash}`, DAY_MS)).count <=
            config.RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX;
      } catch {
        // The counters are down (their outage is logged once by the store): an email a person asked
        // for goes out rather than being lost; the request limits still apply by their own policy.
        return true;
      }
      if (within) return true;
      emailOverBudgetEvent(template);
      const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
      log.warn(
        { template, addressHash: hash, domain },
        'email not queued: its address is over its email budget (RATE_LIMIT_EMAIL_ADDRESS_MAX / RATE_LIMIT_EMAIL_ADDRESS_DAILY_MAX)',
      );
      return false;
    },
  };
}
