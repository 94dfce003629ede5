/**
 * The one thing the rest of the service asks of mail: "send this message". Account flows (auth/flows/)
 * build a message from a template name and its locals and hand it to `send` together with the database
 * transaction in which they write the ticket, pending change or account the message is about.
 *
 * Taking the transaction is the point of the port: a flow's writes and its email stand or fall together.
 * Delivered at once (mailer.ts), a refusal rejects with EMAIL_UNAVAILABLE (503) and the flow's
 * transaction rolls back, so nobody is left with a ticket they never received; a durable outbox can
 * instead write the message in the same transaction and deliver it after the commit.
 */
import type { Queryable } from '../db/database.ts';
import type { TemplateLocals, TemplateName } from './templates.ts';

export interface OutgoingEmail {
  to: string;
  template: TemplateName;
  locals: TemplateLocals;
  /** Extra headers, e.g. HBP's `X-Ticket` / `X-Token`. */
  headers?: Record<string, string>;
}

export interface MailPort {
  /** False with EMAILS_ENABLED=false: `send` refuses, and the flows that need an email are switched off. */
  readonly sends: boolean;
  /**
   * Hands `email` over as part of the transaction `tx`. Resolves once the message is accepted; rejects
   * with an AppError (EMAIL_UNAVAILABLE, EMAILS_DISABLED) when it cannot be, and the caller lets its
   * transaction roll back.
   */
  send(tx: Queryable, email: OutgoingEmail): Promise<void>;
}
