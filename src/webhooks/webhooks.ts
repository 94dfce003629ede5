/**
 * Webhooks: what happened to accounts and files, POSTed to the app's backend (WEBHOOK_URL) after the
 * change commits. `queue` writes one delivery per receiver into the durable outbox in the change's own
 * transaction (a rolled-back change sends nothing, a committed one always sends); the outbox's sender
 * delivers it with the webhook deliverer (deliverer.ts): signed as Standard Webhooks, retried with
 * backoff, the same `webhook-id` on every attempt, in order per user and receiver.
 *
 * A body is `{type, timestamp, data}` and carries ids and non-secret fields only: never a password,
 * token, code, ticket or link.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { afterCommit, type Queryable } from '../db/database.ts';
import type { AccountEvent } from '../events/types.ts';
import { insertOutboxRow } from '../mail/outbox-store.ts';
import { type WebhookOfEvent, webhookOfAccountEvent } from './account-events.ts';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from './event-types.ts';
import { accountFacts } from './webhooks-store.ts';

/** The outbox kind of webhook deliveries. */
export const WEBHOOK_KIND = 'webhook';

/** An event as a change reports it. */
export interface WebhookEvent {
  readonly type: WebhookEventType;
  /**
   * The user (`x-hasura-user-id`) it is about: sent as `data.user_id`, and the key that keeps one
   * user's deliveries in order. Null for a file uploaded without a user (the admin secret).
   */
  readonly userId: string | null;
  /** The rest of `data`: ids and non-secret fields only. */
  readonly data?: Record<string, unknown>;
}

export class Webhooks {
  private readonly types: ReadonlySet<string>;

  constructor(
    private readonly config: Config,
    private readonly clock: Clock,
    /** Wakes the outbox's sender (after the commit that queued a delivery). */
    private readonly wake: () => void,
  ) {
    const chosen = config.WEBHOOK_EVENTS.length > 0 ? config.WEBHOOK_EVENTS : WEBHOOK_EVENT_TYPES;
    this.types = new Set(chosen);
  }

  /** Whether events of `type` are sent anywhere. */
  wants(type: WebhookEventType): boolean {
    return this.config.WEBHOOK_URL.length > 0 && this.types.has(type);
  }

  /**
   * Queues the webhook an account event becomes (account-events.ts), in the event's transaction: the
   * events/ sink. The account's user id (and address, for an email change) is read in `tx`.
   */
  /** Whether `event` is sent to a receiver (its webhook type is subscribed). */
  wantsAccountEvent(event: AccountEvent): boolean {
    const mapped = webhookOfAccountEvent(event, null);
    return mapped !== undefined && this.wants(mapped.type);
  }

  async fromAccountEvent(tx: Queryable, event: AccountEvent): Promise<void> {
    if (!this.wantsAccountEvent(event)) return;
    const account = await accountFacts(tx, event.accountId);
    // The account is gone (deleted in the same transaction): its deletion is the webhook that counts.
    if (!account) return;
    const hook = webhookOfAccountEvent(event, account.email) as WebhookOfEvent;
    await this.queue(tx, { type: hook.type, userId: account.user_id, data: hook.data });
  }

  /** Queues `event` for every receiver, in `tx` (the change's transaction); nothing when not wanted. */
  async queue(tx: Queryable, event: WebhookEvent): Promise<void> {
    if (!this.wants(event.type)) return;
    const body = JSON.stringify({
      type: event.type,
      timestamp: this.clock.now().toISOString(),
      data: { user_id: event.userId, ...event.data },
    });
    // One id per event: a receiver sees the same id on every attempt, and each receiver its own row.
    const deliveryId = `msg_${randomUUID()}`;
    for (const url of this.config.WEBHOOK_URL)
      await insertOutboxRow(tx, {
        kind: WEBHOOK_KIND,
        template: event.type,
        recipient: url,
        message: { body },
        deliveryId,
        orderingKey: event.userId,
      });
    afterCommit(tx, this.wake);
  }
}

/** The `user.created` event of a new account. */
export function userCreated(
  userId: string,
  email: string | null,
  active: boolean,
  extra: Record<string, unknown> = {},
): WebhookEvent {
  return { type: 'user.created', userId, data: { email, active, ...extra } };
}

/** The `file.uploaded` event of a stored file (plain or TUS upload; an overwrite too). */
export function fileUploaded(
  info: { key: string; size: number; contentType: string },
  ownerId: string | null,
): WebhookEvent {
  return {
    type: 'file.uploaded',
    userId: ownerId,
    data: { key: info.key, size: info.size, content_type: info.contentType },
  };
}

/** The `file.deleted` event of a removed file. */
export function fileDeleted(key: string, ownerId: string | null): WebhookEvent {
  return { type: 'file.deleted', userId: ownerId, data: { key } };
}
