/**
 * The one thing the rest of the service asks of mail: "send this message". Account flows (auth/flows/)
 * build a message from a template name and its locals and hand it to `send` together with the database
 * transaction in which they write the ticket, pending change or account the message is about.
 *
 * Taking the transaction is the point of the port: the message is written to the durable outbox
 * (outbox.ts) in that transaction and delivered only after it commits. So a link works the moment its
 * email arrives (its ticket is committed first), a rolled-back flow sends nothing, and an SMTP outage
 * delays emails (retried until EMAIL_MAX_ATTEMPTS) instead of failing the request.
 */
import type { Queryable } from '../db/database.ts';
import type { TemplateLocals, TemplateName } from './templates.ts';

export interface OutgoingEmail {
  to: string;
  template: TemplateName;
  locals: TemplateLocals;
  /** Extra headers, e.g. HBP's `X-Ticket` / `X-Token`. */
  headers?: Record<string, string>;
  /** When the message's link expires: an email still unsent then is given up instead of sent dead. */
  expiresAt?: Date;
}

/**
 * Steps of a flow that must answer before it looks the address up (so that neither status nor time tells
 * whether an account exists), recorded durably by `sendLater` and run after the response by one sender.
 */
export type DeferredStep = 'password-reset' | 'activation-resend' | 'magic-link-login' | 'email-otp';

/** The input every deferred step takes: the address typed and the checked `redirect_to`. */
export interface DeferredInput {
  email: string;
  redirectTo?: string;
  /** `email-otp`: an unknown address gets a sign-up code. */
  createUser?: boolean;
}

export interface MailPort {
  /** False with EMAILS_ENABLED=false: `send` refuses, and the flows that need an email are switched off. */
  readonly sends: boolean;
  /**
   * Writes `email` to the outbox as part of the transaction `tx` (a plain database handle commits it at
   * once); it is delivered after the commit. Rejects with EMAILS_DISABLED when emails are off.
   */
  send(tx: Queryable, email: OutgoingEmail): Promise<void>;
  /**
   * Records `step` durably (resolves once it is committed); a sender runs it after the response, once,
   * in a transaction in which the step's own emails are queued.
   */
  sendLater(db: Queryable, step: DeferredStep, input: DeferredInput): Promise<void>;
}
