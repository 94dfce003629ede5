/**
 * Single-use tickets, typed by purpose and stored only as SHA-256 digests (auth.tickets). A ticket issued
 * for one purpose never works for another (HBP's one untyped column let an MFA ticket reset a password).
 * The ticket value is a random uuid v4, the format HBP clients expect.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Queryable } from '../db/database.ts';
import { sha256Hex } from './secrets.ts';

export type TicketPurpose =
  | 'activation'
  | 'magic-link'
  | 'password-reset'
  | 'email-change'
  | 'mfa-login'
  | 'email-otp';

/** Lifetime of an email one-time code, in minutes (flows/email-otp.ts). */
export const EMAIL_CODE_LIFETIME_MINUTES = 10;

export interface IssuedTicket {
  ticket: string;
  expiresAt: Date;
}

export interface ConsumedTicket {
  accountId: string;
  payload: Record<string, unknown>;
}

/** Lifetime of a purpose's tickets, in minutes, from the TICKET_* settings. */
export function ticketLifetimeMinutes(config: Config, purpose: TicketPurpose): number {
  switch (purpose) {
    case 'activation':
      return config.TICKET_ACTIVATION_EXPIRES_IN;
    case 'magic-link':
      return config.MAGIC_LINK_EXPIRES_IN;
    case 'password-reset':
      return config.TICKET_PASSWORD_RESET_EXPIRES_IN;
    case 'email-change':
      return config.TICKET_EMAIL_CHANGE_EXPIRES_IN;
    case 'mfa-login':
      return config.TICKET_MFA_EXPIRES_IN;
    case 'email-otp':
      return EMAIL_CODE_LIFETIME_MINUTES;
  }
}

/**
 * Issues a ticket for `accountId`. Earlier unused tickets of the same purpose for the same account are
 * retired (only the newest reset link or activation link works), unless `keepEarlier` is set.
 */
export async function issueTicket(
  db: Queryable,
  config: Config,
  now: Date,
  input: {
    accountId: string;
    purpose: TicketPurpose;
    payload?: Record<string, unknown>;
    lifetimeMinutes?: number;
    keepEarlier?: boolean;
  },
): Promise<IssuedTicket> {
  const ticket = randomUUID();
  const minutes = input.lifetimeMinutes ?? ticketLifetimeMinutes(config, input.purpose);
  const expiresAt = new Date(now.getTime() + minutes * 60_000);
  // Housekeeping (HBP never purged): spent and expired tickets of this account older than a day go.
  await db.query(
    'PurgeOldTickets',
    `DELETE FROM auth.tickets
      WHERE account_id = $1 AND (used_at IS NOT NULL OR expires_at <= $2) AND created_at < $2::timestamptz - interval '1 day'`,
    [input.accountId, now],
  );
  if (!input.keepEarlier) {
    await db.query(
      'RetireTickets',
      `UPDATE auth.tickets SET used_at = $3
        WHERE account_id = $1 AND purpose = $2 AND used_at IS NULL`,
      [input.accountId, input.purpose, now],
    );
  }
  await db.query(
    'InsertTicket',
    `INSERT INTO auth.tickets (ticket_hash, account_id, purpose, payload, created_at, expires_at)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6)`,
    [sha256Hex(ticket), input.accountId, input.purpose, JSON.stringify(input.payload ?? {}), now, expiresAt],
  );
  return { ticket, expiresAt };
}

interface TicketRow {
  account_id: string;
  payload: Record<string, unknown> | string;
}

function toConsumed(row: TicketRow): ConsumedTicket {
  const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
  return { accountId: row.account_id, payload: payload ?? {} };
}

/**
 * Uses up a valid ticket of `purpose` in one statement, so two concurrent requests can never both
 * succeed. Undefined when the ticket is unknown, of another purpose, expired or already used.
 */
export async function consumeTicket(
  db: Queryable,
  now: Date,
  ticket: string,
  purpose: TicketPurpose,
): Promise<ConsumedTicket | undefined> {
  const { rows } = await db.query<TicketRow>(
    'ConsumeTicket',
    `UPDATE auth.tickets SET used_at = $3
      WHERE ticket_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3
      RETURNING account_id, payload`,
    [sha256Hex(ticket), purpose, now],
  );
  return rows[0] ? toConsumed(rows[0]) : undefined;
}

/** Reads a valid ticket without using it (a second factor must be checked before the ticket is spent). */
export async function peekTicket(
  db: Queryable,
  now: Date,
  ticket: string,
  purpose: TicketPurpose,
): Promise<(ConsumedTicket & { failedAttempts: number }) | undefined> {
  const { rows } = await db.query<TicketRow & { failed_attempts: number }>(
    'PeekTicket',
    `SELECT account_id, payload, failed_attempts FROM auth.tickets
      WHERE ticket_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3`,
    [sha256Hex(ticket), purpose, now],
  );
  const row = rows[0];
  return row ? { ...toConsumed(row), failedAttempts: row.failed_attempts } : undefined;
}

/**
 * Counts a failed attempt against a ticket (a wrong TOTP code, say). When the count reaches
 * `maxAttempts` the ticket is used up, so it cannot be brute-forced. Returns the new count, or undefined
 * when the ticket was not valid.
 */
export async function recordTicketFailure(
  db: Queryable,
  now: Date,
  ticket: string,
  purpose: TicketPurpose,
  maxAttempts: number,
): Promise<number | undefined> {
  const { rows } = await db.query<{ failed_attempts: number }>(
    'RecordTicketFailure',
    `UPDATE auth.tickets
        SET failed_attempts = failed_attempts + 1,
            used_at = CASE WHEN failed_attempts + 1 >= $4 THEN $3::timestamptz ELSE NULL END
      WHERE ticket_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3
      RETURNING failed_attempts`,
    [sha256Hex(ticket), purpose, now, maxAttempts],
  );
  return rows[0]?.failed_attempts;
}

/** Retires every unused ticket of an account (all purposes, or one). */
export async function retireTickets(
  db: Queryable,
  now: Date,
  accountId: string,
  purpose?: TicketPurpose,
): Promise<void> {
  await db.query(
    'RetireAccountTickets',
    `UPDATE auth.tickets SET used_at = $2
      WHERE account_id = $1 AND used_at IS NULL AND ($3::text IS NULL OR purpose = $3)`,
    [accountId, now, purpose ?? null],
  );
}
