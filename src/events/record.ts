/**
 * recordEvent: the one call a flow makes when something happens to an account. It runs inside the
 * change's transaction, so the event exists exactly when the change does (a rolled-back change leaves no
 * event, a committed one always has its event). Each sink is one step below; a new sink (webhook
 * deliveries, metrics) is one more step here, with what it needs added to EventDeps.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Queryable } from '../db/database.ts';
import { insertSecurityEvent } from './events-store.ts';
import type { AccountEvent, AccountEventType } from './types.ts';

/** What recording an event needs from outside. */
export interface EventDeps {
  readonly clock: Clock;
}

/** Events of these types are kept at most once per this many milliseconds per account (a flood of guesses). */
const THROTTLED: Partial<Record<AccountEventType, number>> = { sign_in_failed: 60_000 };

/** The longest user agent kept: a client can send kilobytes, the feed shows a line. */
const USER_AGENT_MAX = 512;

/**
 * Records `event` in `tx` (a transaction, or the database for a change that has none, as a failed
 * sign-in). Resolves with whether the feed kept it (false: throttled, or no such account).
 */
export async function recordEvent(deps: EventDeps, tx: Queryable, event: AccountEvent): Promise<boolean> {
  const client = event.client ?? null;
  return insertSecurityEvent(tx, {
    id: randomUUID(),
    accountId: event.accountId,
    type: event.type,
    createdAt: deps.clock.now(),
    ip: client?.ip ?? null,
    userAgent: client?.userAgent == null ? null : client.userAgent.slice(0, USER_AGENT_MAX),
    sessionId: event.sessionId ?? null,
    details: event.details,
    atMostOneWithinMs: THROTTLED[event.type],
  });
}
