/** Shared set-up of the email-flow suites: the real app wired to a real SMTP server in this process. */
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import type { DbKind } from '../helpers/db.ts';
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts';

export interface MailTestApp extends TestApp {
  smtp: TestSmtp;
}

export async function buildMailApp(kind: DbKind, overrides: ConfigOverrides = {}): Promise<MailTestApp> {
  const smtp = await startSmtp();
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
    { clock: new TestClock(Date.now()) },
  );
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
