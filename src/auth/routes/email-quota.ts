/**
 * A per-address limit on the routes that email someone on request, so they cannot be used to flood a
 * mailbox. It counts requests, not deliveries: an address with no account is limited the same way, so a
 * 429 tells nothing about who is registered.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.ts';
import { emailKey } from '../../http/counters.ts';

export async function consumeEmailQuota(
  app: FastifyInstance,
  config: Config,
  address: string,
): Promise<void> {
  await app.limiter.consume(
    `email:${emailKey(address)}`,
    config.RATE_LIMIT_EMAIL_MAX,
    config.RATE_LIMIT_EMAIL_WINDOW,
  );
}
