/**
 * The webhook event types, in a module of its own with no imports: config.ts checks WEBHOOK_EVENTS
 * against them at start, and the webhook sink (webhooks/) sends them.
 */
export const WEBHOOK_EVENT_TYPES = [
  'user.created',
  'user.activated',
  'user.updated',
  'user.deleted',
  'session.created',
  'session.ended',
  'password.changed',
  'mfa.enabled',
  'mfa.disabled',
  'file.uploaded',
  'file.deleted',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
