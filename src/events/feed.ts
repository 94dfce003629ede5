/**
 * The owner's security feed (GET /auth/security-events): their own events, newest first, in pages. The
 * cursor `before` is the id of the last event of the previous page; an id that is not one of the caller's
 * events is refused like a malformed one (400), so it confirms nothing about other accounts.
 */
import type { Clock } from '../clock.ts';
import type { Queryable } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { findEventCursor, listSecurityEvents, pruneSecurityEvents } from './events-store.ts';

/** An event as its owner sees it. */
export interface SecurityEventView {
  id: string;
  type: string;
  created_at: string;
  ip: string | null;
  user_agent: string | null;
  session_id: string | null;
  details: Record<string, unknown>;
}

export const FEED_LIMIT_MAX = 100;
export const FEED_LIMIT_DEFAULT = 50;

const EVENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One page of the account's feed; `limit` 1..100, `before` an event id of the account (else 400). */
export async function securityFeed(
  db: Queryable,
  accountId: string,
  page: { limit?: number; before?: string },
): Promise<SecurityEventView[]> {
  const limit = page.limit ?? FEED_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > FEED_LIMIT_MAX)
    throw new AppError('VALIDATION', `"limit" must be an integer from 1 to ${FEED_LIMIT_MAX}`);
  let cursor: Awaited<ReturnType<typeof findEventCursor>>;
  if (page.before !== undefined) {
    cursor = EVENT_ID.test(page.before)
      ? await findEventCursor(db, accountId, page.before.toLowerCase())
      : undefined;
    if (!cursor) throw new AppError('VALIDATION', '"before" must be the id of one of your events');
  }
  const rows = await listSecurityEvents(db, accountId, limit, cursor);
  return rows.map((r) => ({
    id: r.id,
    type: r.type,
    created_at: r.created_at.toISOString(),
    ip: r.ip,
    user_agent: r.user_agent,
    session_id: r.session_id,
    details: r.details,
  }));
}

/** Deletes the events older than `retentionDays`; how many went. */
export function pruneSecurityFeed(db: Queryable, clock: Clock, retentionDays: number): Promise<number> {
  return pruneSecurityEvents(db, new Date(clock.now().getTime() - retentionDays * 86_400_000));
}
