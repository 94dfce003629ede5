/** Shared set-up of the email-flow suites: the real app wired to a real SMTP server in this process. */
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import type { DbKind } from '../helpers/db.ts';
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts';

export interface MailTestApp extends TestApp {
  smtp: TestSmtp;
}

/**
 * The app wired to a fresh test SMTP server. Emails go out through the durable outbox after the request's
 * commit; so that suites can read them right after a response, each response waits (in an onSend hook)
 * until the outbox has nothing in progress, deferred steps included. `waitForEmails: false` leaves
 * responses as the service gives them (the outbox suites, which look at the timing itself).
 */
export async function buildMailApp(
  kind: DbKind,
  overrides: ConfigOverrides = {},
  opts: { waitForEmails?: boolean } = {},
): Promise<MailTestApp> {
  const smtp = await startSmtp();
  const holder: { ctx?: TestApp['ctx'] } = {};
  const t = await buildTestApp(
    kind,
    {
      ...HS,
      SERVER_URL: 'http://gatehouse.test',
      SMTP_HOST: '127.0.0.1',
      SMTP_PORT: smtp.port,
      SMTP_SENDER: 'Gatehouse <no-reply@gatehouse.test>',
      SMTP_TIMEOUT_MS: 2000,
      RATE_LIMIT_ENABLED: false,
      ...overrides,
    },
    {
      clock: new TestClock(Date.now()),
      beforeReady: (app) => {
        if (opts.waitForEmails === false) return;
        app.addHook('onSend', async () => {
          await holder.ctx?.tasks.idle();
        });
      },
    },
  );
  holder.ctx = t.ctx;
  return {
    ...t,
    smtp,
    async close() {
      await t.close();
      await smtp.stop();
    },
  };
}

export { createAccount, signIn } from '../helpers/accounts.ts';

export async function accountRow(t: TestApp, accountId: string) {
  const { rows } = await t.ctx.db.query<{ email: string | null; new_email: string | null; active: boolean }>(
    'TestAccountRow',
    'SELECT email::text AS email, new_email::text AS new_email, active FROM auth.accounts WHERE id = $1',
    [accountId],
  );
  return rows[0];
}

export async function liveTickets(t: TestApp, accountId: string, purpose: string): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>(
    'TestLiveTickets',
    `SELECT count(*)::int AS n FROM auth.tickets
      WHERE account_id = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3`,
    [accountId, purpose, t.clock.now()],
  );
  return rows[0]?.n ?? 0;
}

export async function sessionCount(t: TestApp, accountId: string): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>(
    'TestSessionCount',
    'SELECT count(*)::int AS n FROM auth.session_tokens WHERE account_id = $1',
    [accountId],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Makes every email the outbox holds back (a failed attempt waits EMAIL_RETRY_DELAY_MS) due now, and
 * waits for the sender's pass: what SMTP refused while it was down goes out here, not in a later test.
 */
export async function deliverQueuedNow(t: TestApp): Promise<void> {
  await t.ctx.db.query(
    'TestOutboxDueNow',
    'UPDATE auth.email_outbox SET next_attempt_at = now() WHERE sent_at IS NULL AND failed_at IS NULL',
  );
  t.ctx.outbox.wake();
  await t.ctx.tasks.idle();
}

/** The outbox rows not yet sent nor given up. */
export async function queuedEmails(
  t: TestApp,
): Promise<{ kind: string; recipient: string | null; attempts: number; last_error: string | null }[]> {
  const { rows } = await t.ctx.db.query<{
    kind: string;
    recipient: string | null;
    attempts: number;
    last_error: string | null;
  }>(
    'TestQueuedEmails',
    `SELECT kind, recipient, attempts, last_error FROM auth.email_outbox
      WHERE sent_at IS NULL AND failed_at IS NULL ORDER BY id`,
  );
  return rows;
}
