/** The email outbox as an operator sees it (GET /admin/emails): where each email stands, not its link. */
import type { Database } from '../db/database.ts';
import { listOutboxEmails, type OutboxListing } from '../mail/outbox-store.ts';

export function recentEmails(deps: { db: Database }, limit: number): Promise<OutboxListing[]> {
  return listOutboxEmails(deps.db, limit);
}
