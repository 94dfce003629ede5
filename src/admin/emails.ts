/**
 * The durable outbox as an operator sees it: where each email stands, not its link (GET /admin/emails),
 * and the webhook deliveries given up (GET /admin/webhooks/failed, as `gatehouse webhooks list-failed`).
 */
import type { Database } from '../db/database.ts';
import {
  type FailedRow,
  listFailedRows,
  listOutboxEmails,
  type OutboxListing,
} from '../mail/outbox-store.ts';
import { WEBHOOK_KIND } from '../webhooks/webhooks.ts';

export function recentEmails(deps: { db: Database }, limit: number): Promise<OutboxListing[]> {
  return listOutboxEmails(deps.db, limit);
}

export function failedWebhooks(deps: { db: Database }, limit: number): Promise<FailedRow[]> {
  return listFailedRows(deps.db, WEBHOOK_KIND, limit);
}
