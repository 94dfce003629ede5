/**
 * The account events: one per security-relevant change, as the flows report it. A flow makes one call,
 * recordEvent (events/record.ts), inside the transaction of its change; every sink (the owner's security
 * feed today) is fed from there. An event carries what happened and from where, never a secret: no
 * password, token, code, ticket or link, so every sink can show or send it as it is.
 */

/** Where a request came from, as the service sees it (the address as TRUST_PROXY allows). */
export interface EventClient {
  readonly ip: string | null;
  readonly userAgent: string | null;
}

/** Why sessions ended (details of `session_ended`). */
export type SessionEndReason =
  /** POST /auth/logout of one session. */
  | 'logout'
  /** POST /auth/logout {all: true}, POST /auth/token/revoke: every session of the caller. */
  | 'sign_out_everywhere'
  /** DELETE /auth/sessions/{id}: the owner ended one of their sessions. */
  | 'ended_by_owner'
  | 'password_changed'
  | 'password_reset'
  | 'email_changed'
  | 'mfa_changed'
  /** The address was proven for the first time by a link: the ways in made before it end (link-emails.ts). */
  | 'address_proven'
  /** A rotated refresh token came back after its grace interval: taken as stolen. */
  | 'refresh_token_reuse'
  /** The operator (CLI, console) signed the account out. */
  | 'operator'
  | 'account_disabled';

/** What happened, by type, with the details each type carries. */
export type AccountEventBody =
  /** A session began; `method` is GET /auth/sessions' sign_in_method (password, magic-link, mfa, oauth:<p>…). */
  | { type: 'sign_in'; details: { method: string } }
  /** A wrong password or a wrong second-factor code (at most one a minute per account is kept). */
  | { type: 'sign_in_failed'; details: { reason: 'password' | 'mfa_code' } }
  | { type: 'session_ended'; details: { reason: SessionEndReason; sessions: string[] } }
  | { type: 'password_changed'; details: Record<string, never> }
  | { type: 'password_reset'; details: Record<string, never> }
  /** `confirmed`: through a link sent to the new address (VERIFY_EMAILS), else directly. */
  | { type: 'email_changed'; details: { confirmed: boolean } }
  | { type: 'mfa_enabled'; details: Record<string, never> }
  | { type: 'mfa_disabled'; details: Record<string, never> }
  | { type: 'provider_linked'; details: { provider: string } }
  | { type: 'provider_unlinked'; details: { provider: string } }
  | { type: 'account_disabled'; details: { by: 'operator' } }
  /** A passkey was added (or came with a sign-up); `passkey` is its id in GET /auth/passkeys. */
  | { type: 'passkey_added'; details: { passkey: string; name: string } }
  | { type: 'passkey_removed'; details: { passkey: string; name: string } }
  /**
   * A sign-in with the passkey was refused because its signature counter went backwards: another copy
   * of its key (a cloned authenticator) is being used.
   */
  | { type: 'passkey_clone_detected'; details: { passkey: string; name: string } }
  // Changes an operator made (the admin API, the console's admin pages, `gatehouse users`); `by` says
  // with which credential.
  | { type: 'admin_user_created'; details: { by: OperatorRef; active: boolean; invited: boolean } }
  | {
      type: 'admin_roles_changed';
      details: { by: OperatorRef; roles: string[]; default_role: string; sessions: string[] };
    }
  | { type: 'admin_account_disabled'; details: { by: OperatorRef; sessions: string[] } }
  | { type: 'admin_account_enabled'; details: { by: OperatorRef } }
  /** A new address (not named here: the feed keeps no address), `verified` when the operator vouched. */
  | { type: 'admin_email_changed'; details: { by: OperatorRef; verified: boolean } }
  | { type: 'admin_email_verification_changed'; details: { by: OperatorRef; verified: boolean } }
  | { type: 'admin_profile_changed'; details: { by: OperatorRef; fields: string[] } }
  | { type: 'admin_signed_out'; details: { by: OperatorRef; sessions: string[] } }
  /** A link made for support: `sent` by email to the account's address, else handed to the operator. */
  | { type: 'admin_link_issued'; details: { by: OperatorRef; link: string; sent: boolean } };

/**
 * Which credential an operator's change came with: the admin secret, an access token with ADMIN_ROLE
 * (whose user), or the `gatehouse` command at the machine.
 */
export type OperatorRef = { via: 'admin-secret' } | { via: 'admin-role'; user_id: string } | { via: 'cli' };

export type AccountEventType = AccountEventBody['type'];

/** Every event type, in the order the documentation lists them. */
export const ACCOUNT_EVENT_TYPES: readonly AccountEventType[] = [
  'sign_in',
  'sign_in_failed',
  'session_ended',
  'password_changed',
  'password_reset',
  'email_changed',
  'mfa_enabled',
  'mfa_disabled',
  'provider_linked',
  'provider_unlinked',
  'account_disabled',
  'passkey_added',
  'passkey_removed',
  'passkey_clone_detected',
  'admin_user_created',
  'admin_roles_changed',
  'admin_account_disabled',
  'admin_account_enabled',
  'admin_email_changed',
  'admin_email_verification_changed',
  'admin_profile_changed',
  'admin_signed_out',
  'admin_link_issued',
];

/** An event as a flow reports it: whose account, from which session and client, and what happened. */
export type AccountEvent = AccountEventBody & {
  readonly accountId: string;
  /** The session the action came from, or the one a sign-in began; absent when none (CLI, reset link). */
  readonly sessionId?: string | null;
  /** The request's client; absent for the CLI and background work. */
  readonly client?: EventClient | null;
};
