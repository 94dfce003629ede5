/**
 * Delivers one webhook row of the outbox: a POST of the stored body to its receiver, signed as Standard
 * Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,…`) with WEBHOOK_SECRET. A 2xx
 * answer delivers it; anything else (another status, no answer within WEBHOOK_TIMEOUT_MS, a refused
 * connection) is a failed attempt the outbox retries, with the same `webhook-id`.
 */
import { Webhook } from 'standardwebhooks';
import type { Config } from '../config.ts';
import type { Deliverer } from '../mail/outbox.ts';
import type { OutboxRow } from '../mail/outbox-store.ts';

/** An attempt that failed, said in one line for `last_error` (no secret: the body has none either). */
class DeliveryFailed extends Error {}

export function webhookDeliverer(config: Config): Deliverer {
  const signer = new Webhook(config.WEBHOOK_SECRET);
  return {
    noun: 'webhook',
    maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
    retryDelayMs: config.WEBHOOK_RETRY_DELAY_MS,
    retryMaxDelayMs: config.WEBHOOK_RETRY_MAX_DELAY_MS,
    async deliver(row: OutboxRow, { signal }) {
      const body = (row.message as { body?: unknown } | null)?.body;
      if (typeof body !== 'string' || !row.recipient || !row.delivery_id)
        throw new DeliveryFailed('the delivery row has no body, receiver or id');
      // The wall clock, not the service's: receivers check this against theirs (the replay window).
      const now = new Date();
      const headers = {
        'content-type': 'application/json',
        'webhook-id': row.delivery_id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': signer.sign(row.delivery_id, now, body),
      };
      // Never marked as handed over: a delivery cut short by a stop is sent again later with the same
      // id, which at-least-once delivery allows and the receiver's de-duplication absorbs.
      let status: number;
      try {
        const res = await fetch(row.recipient, {
          method: 'POST',
          headers,
          body,
          redirect: 'manual',
          signal: AbortSignal.any([signal, AbortSignal.timeout(config.WEBHOOK_TIMEOUT_MS)]),
        });
        status = res.status;
        await res.body?.cancel().catch(() => {});
      } catch (err) {
        const e = err as Error & { cause?: { code?: string; message?: string } };
        if (e.name === 'TimeoutError')
          throw new DeliveryFailed(`no answer within WEBHOOK_TIMEOUT_MS (${config.WEBHOOK_TIMEOUT_MS} ms)`);
        const why = e.cause?.code ?? e.cause?.message ?? e.message;
        throw new DeliveryFailed(`the receiver could not be reached: ${why}`, { cause: err });
      }
      if (status < 200 || status >= 300) throw new DeliveryFailed(`the receiver answered HTTP ${status}`);
    },
  };
}
