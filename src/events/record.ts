/**
 * recordEvent: the one call a flow makes when something happens to an account. It runs inside the
 * change's transaction, so the event exists exactly when the change does (a rolled-back change leaves no
 * event, a committed one always has its event). Each sink is one step below; a new sink (webhook
 * deliveries, metrics) is one more step here, with what it needs added to EventDeps.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Queryable } from '../db/database.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';
import { insertSecurityEvent, type NewSecurityEvent } from './events-store.ts';
import type { AccountEvent, AccountEventType } from './types.ts';

/** What recording an event needs from outside. */
export interface EventDeps {
  readonly clock: Clock;
  /** The webhook sink (webhooks/); absent where nothing is sent (tools that record no event). */
  readonly webhooks?: Webhooks;
}

/** Events of these types are kept at most once per this many milliseconds per account (a flood of guesses). */
const THROTTLED: Partial<Record<AccountEventType, number>> = { sign_in_failed: 60_000 };

let lastMs = 0;
let counter = 0;

/**
 * A time-ordered id (UUID version 7, RFC 9562, with a 12-bit counter within a millisecond): the feed is
 * ordered by (created_at, id), so events recorded in the same instant keep the order they happened in on
 * this instance. Never repeats and never goes backwards here, even when the clock does.
 */
export function eventId(nowMs: number): string {
  if (nowMs > lastMs) {
    lastMs = nowMs;
    counter = 0;
  } else if (++counter > 0xfff) {
    lastMs++;
    counter = 0;
  }
  const b = randomBytes(16);
  b.writeUIntBE(lastMs, 0, 6);
  b[6] = 0x70 | (counter >> 8);
  b[7] = counter & 0xff;
  b[8] = 0x80 | ((b[8] as number) & 0x3f);
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The longest user agent kept: a client can send kilobytes, the feed shows a line. */
const USER_AGENT_MAX = 512;

/**
 * Records `event` in `tx` (a transaction, or the database for a change that has none, as a failed
 * sign-in). Resolves with whether the feed kept it (false: throttled, or no such account).
 */
export async function recordEvent(deps: EventDeps, tx: Queryable, event: AccountEvent): Promise<boolean> {
  // Sent whether or not the feed keeps it (a throttled failed sign-in has no webhook anyway).
  await deps.webhooks?.fromAccountEvent(tx, event);
  return insertSecurityEvent(tx, eventRow(deps, event));
}

/** The feed's row of `event`, as recordEvent writes it. */
export function eventRow(deps: EventDeps, event: AccountEvent): NewSecurityEvent {
  const client = event.client ?? null;
  return {
    id: eventId(deps.clock.now().getTime()),
    accountId: event.accountId,
    type: event.type,
    createdAt: deps.clock.now(),
    ip: client?.ip ?? null,
    userAgent: client?.userAgent == null ? null : client.userAgent.slice(0, USER_AGENT_MAX),
    sessionId: event.sessionId ?? null,
    details: event.details,
    atMostOneWithinMs: THROTTLED[event.type],
  };
}

/**
 * Whether recording `event` is its feed row alone (no webhook subscribed to it, no throttling), so that
 * a caller may write that row within a statement of its own (sessions.ts, a sign-in's one statement).
 */
export function onlyTheFeed(deps: EventDeps, event: AccountEvent): boolean {
  return THROTTLED[event.type] === undefined && !(deps.webhooks?.wantsAccountEvent(event) ?? false);
}
