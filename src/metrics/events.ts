/**
 * What the service tells its metrics, as named events on `node:diagnostics_channel`. Domain code calls
 * the small functions below and knows nothing of Prometheus; the metrics registry (registry.ts)
 * subscribes. Publishing costs nothing while nobody listens (metrics off), and no dependency object has
 * to carry a metrics handle through every flow.
 *
 * Events carry labels only (outcomes, operations, modes): never an address, a user id or a credential.
 * A channel is per process, so two apps built in one process (tests) see each other's events; the service
 * runs one app per process.
 */
import { channel } from 'node:diagnostics_channel';

export type SignInMethod =
  | 'password'
  | 'mfa'
  | 'magic_link'
  | 'email_otp'
  | 'anonymous'
  | 'provider'
  | 'passkey';
export type SignInOutcome =
  /** A session was issued. */
  | 'success'
  /** The password was right and the account has MFA: a ticket for the second step was issued. */
  | 'mfa_required'
  /** Unknown email or wrong password (one outcome: they are answered alike). */
  | 'wrong_password'
  /** Refused by a guess limit or the sign-in rate limit (429). */
  | 'locked'
  | 'not_activated'
  /** The account is disabled by an operator. */
  | 'disabled'
  /** A wrong or reused TOTP code, or a dead MFA ticket. */
  | 'invalid_code'
  /** A provider sign-in that ended at the failure URL (bad state, ID token, unvouched email…); a passkey
   * assertion that did not verify (unknown credential, bad signature, origin, flags, dead challenge). */
  | 'refused'
  /** A passkey whose signature counter went backwards (a cloned authenticator). */
  | 'cloned';
export type RefreshOutcome =
  /** The token was rotated into a successor. */
  | 'rotated'
  /** A token rotated within REFRESH_TOKEN_REUSE_INTERVAL got a sibling (racing tabs). */
  | 'grace'
  /** A rotated token came back later: its whole session family was revoked. */
  | 'reuse_detected'
  /** Unknown, expired or revoked token, or an inactive account. */
  | 'invalid';
export type EmailOutcome = 'sent' | 'failed';
/** What the outbox did with an email (or deferred step) whose attempt failed. */
export type OutboxOutcome = 'retry' | 'given_up';

export interface SignInEvent {
  method: SignInMethod;
  outcome: SignInOutcome;
}
export interface RefreshEvent {
  outcome: RefreshOutcome;
}
export interface EmailEvent {
  outcome: EmailOutcome;
  mode: string;
  template: string;
}
export interface OutboxEvent {
  outcome: OutboxOutcome;
  /** The email's template, the deferred step's name, or the webhook's event type. */
  template: string;
  /** The row's kind: 'email', a deferred step, or 'webhook'. */
  kind: string;
}
export interface EmailOverBudgetEvent {
  template: string;
}
export interface HashWaitEvent {
  /** Seconds the job waited for a hashing thread. */
  waitSeconds: number;
}
export interface HashRefusedEvent {
  refused: true;
}

export const channels = {
  signIn: channel('gatehouse:sign-in'),
  refresh: channel('gatehouse:token-refresh'),
  email: channel('gatehouse:email'),
  outbox: channel('gatehouse:email-outbox'),
  emailOverBudget: channel('gatehouse:email-over-budget'),
  objectStoreError: channel('gatehouse:object-store-error'),
  hashWait: channel('gatehouse:password-hash-wait'),
  hashRefused: channel('gatehouse:password-hash-refused'),
} as const;

export function signInEvent(method: SignInMethod, outcome: SignInOutcome): void {
  if (channels.signIn.hasSubscribers) channels.signIn.publish({ method, outcome } satisfies SignInEvent);
}

export function refreshEvent(outcome: RefreshOutcome): void {
  if (channels.refresh.hasSubscribers) channels.refresh.publish({ outcome } satisfies RefreshEvent);
}

export function emailEvent(outcome: EmailOutcome, mode: string, template: string): void {
  if (channels.email.hasSubscribers) channels.email.publish({ outcome, mode, template } satisfies EmailEvent);
}

export function outboxEvent(outcome: OutboxOutcome, template: string, kind: string): void {
  if (channels.outbox.hasSubscribers)
    channels.outbox.publish({ outcome, template, kind } satisfies OutboxEvent);
}

/** An email was not queued: its address had used up its budget (mail/budget.ts). */
export function emailOverBudgetEvent(template: string): void {
  if (channels.emailOverBudget.hasSubscribers)
    channels.emailOverBudget.publish({ template } satisfies EmailOverBudgetEvent);
}

/** The object store could not answer (the storage routes then answer 503). */
export function objectStoreErrorEvent(): void {
  if (channels.objectStoreError.hasSubscribers) channels.objectStoreError.publish(undefined);
}

export function hashWaitEvent(waitSeconds: number): void {
  if (channels.hashWait.hasSubscribers) channels.hashWait.publish({ waitSeconds } satisfies HashWaitEvent);
}

export function hashRefusedEvent(): void {
  if (channels.hashRefused.hasSubscribers)
    channels.hashRefused.publish({ refused: true } satisfies HashRefusedEvent);
}

/**
 * The sign-in outcome an error stands for, when it stands for one: the error codes the sign-in routes
 * answer with. Anything else (a 503, a validation error) is no outcome of the attempt.
 */
export function signInOutcomeOf(err: unknown): SignInOutcome | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case 'INVALID_CREDENTIALS':
      return 'wrong_password';
    case 'RATE_LIMITED':
      return 'locked';
    case 'ACCOUNT_NOT_ACTIVATED':
      return 'not_activated';
    case 'ACCOUNT_DISABLED':
      return 'disabled';
    case 'INVALID_TICKET':
    case 'INVALID_TOTP':
    case 'INVALID_TOKEN':
      return 'invalid_code';
    case 'PASSKEY_INVALID':
    case 'PASSKEY_CHALLENGE_INVALID':
    case 'PASSKEY_MALFORMED':
      return 'refused';
    case 'PASSKEY_COUNTER_REGRESSED':
      return 'cloned';
    default:
      return undefined;
  }
}

/**
 * A route's `onError` hook that counts a failed sign-in of `method` under the outcome its error stands
 * for (wrong password, locked…); successes are counted by the route itself, which knows which it was.
 */
export function countSignInFailures(method: SignInMethod) {
  return async (_request: unknown, _reply: unknown, error: unknown): Promise<void> => {
    const outcome = signInOutcomeOf(error);
    if (outcome) signInEvent(method, outcome);
  };
}
