/**
 * The webhook an account event becomes (events/record.ts hands every event here): the security feed's
 * types mapped onto the webhook types the ecosystem knows (session.created, password.changed…). Types
 * with no webhook (a failed sign-in, a linked provider) become nothing.
 */
import type { AccountEvent } from '../events/types.ts';
import type { WebhookEventType } from './event-types.ts';

export interface WebhookOfEvent {
  type: WebhookEventType;
  data: Record<string, unknown>;
}

/** The webhook `event` is sent as (`user_id` is added by the sink), or undefined. */
export function webhookOfAccountEvent(event: AccountEvent, email: string | null): WebhookOfEvent | undefined {
  switch (event.type) {
    case 'sign_in':
      return {
        type: 'session.created',
        data: { session_id: event.sessionId ?? null, method: event.details.method },
      };
    case 'session_ended':
      return {
        type: 'session.ended',
        data: { session_ids: event.details.sessions, reason: event.details.reason },
      };
    case 'password_changed':
      return { type: 'password.changed', data: { reset: false } };
    case 'password_reset':
      return { type: 'password.changed', data: { reset: true } };
    case 'email_changed':
      return { type: 'user.updated', data: { changes: ['email'], email } };
    case 'admin_email_changed':
      return { type: 'user.updated', data: { changes: ['email'], email } };
    case 'account_disabled':
      return { type: 'user.updated', data: { changes: ['disabled'], disabled: true } };
    case 'mfa_enabled':
      return { type: 'mfa.enabled', data: {} };
    case 'mfa_disabled':
      return { type: 'mfa.disabled', data: {} };
    default:
      return undefined;
  }
}
