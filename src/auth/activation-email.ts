/**
 * Extension point for the email work (issue: emails). Registration calls this after an inactive account
 * and its 'activation' ticket are committed. The email issue replaces the body with the real
 * `activate-account` email (template, X-Ticket header, link to GET /auth/activate?ticket=…).
 */
import type { AppContext } from '../context.ts';

export interface ActivationEmail {
  email: string;
  displayName: string;
  ticket: string;
}

export async function sendActivationEmail(_ctx: AppContext, _mail: ActivationEmail): Promise<void> {
  // Intentionally empty until the email issue lands: no mailer exists in this branch yet.
}
