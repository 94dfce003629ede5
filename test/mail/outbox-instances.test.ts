/**
 * The durable email outbox across restarts and instances: what one instance queued while SMTP was down is
 * delivered once by the next start on the same database (a request answered 204 and then a crash loses
 * nothing); a sender that died holding a row leaves it to another once its claim runs out; and two
 * instances sharing one PostgreSQL database send each email exactly once.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.ts';
import { configFrom } from '../../src/config.ts';
import { type AppContext, closeContext, createContext } from '../../src/context.ts';
import { type Database, openPglite, openPostgres } from '../../src/db/database.ts';
import { claimDueRows } from '../../src/mail/outbox-store.ts';
import { HS } from '../helpers/accounts.ts';
import { type ConfigOverrides, tempDir } from '../helpers/app.ts';
import {
  createTestDatabase,
  type DbKind,
  dbKinds,
  migratedPgliteDump,
  type TestDatabase,
} from '../helpers/db.ts';
import { runsHere } from '../helpers/requirements.ts';
import { findLink, startSmtp, type TestSmtp } from '../helpers/smtp.ts';

const silent = pino({ level: 'silent' });
const pathOf = (u: URL) => u.pathname + u.search;

interface Instance {
  app: FastifyInstance;
  ctx: AppContext;
  close(): Promise<void>;
}

/** One Gatehouse instance (context and app, not listening) on `db`, mailing to `smtpPort`. */
async function startInstance(
  db: Database,
  dataDir: string,
  smtpPort: number,
  overrides: ConfigOverrides = {},
): Promise<Instance> {
  const config = configFrom({
    DATA_DIR: dataDir,
    CUSTOM_DIR: path.join(dataDir, 'custom'),
    LOG_LEVEL: 'silent',
    ARGON2_MEMORY_COST: 1024,
    ARGON2_TIME_COST: 1,
    ...HS,
    SERVER_URL: 'http://gatehouse.test',
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: smtpPort,
    SMTP_TIMEOUT_MS: 2000,
    RATE_LIMIT_ENABLED: false,
    AUTO_ACTIVATE_NEW_USERS: false,
    LOST_PASSWORD_ENABLED: true,
    REDIRECT_URL_SUCCESS: 'http://app.test/signed-in',
    REDIRECT_URL_ERROR: 'http://app.test/failed',
    EMAIL_RETRY_DELAY_MS: 50,
    EMAIL_RETRY_MAX_DELAY_MS: 100,
    EMAIL_POLL_INTERVAL_MS: 50,
    EMAIL_MAX_ATTEMPTS: 1000,
    ...overrides,
  });
  const ctx = await createContext(config, { log: silent, db });
  const app = await buildApp(ctx, { logger: false });
  await app.ready();
  return {
    app,
    ctx,
    async close() {
      await app.close();
      // Closes `db` too.
      await closeContext(ctx);
    },
  };
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A database that outlives the instances opened on it: PostgreSQL (a fresh database, a new pool per
 * instance) or PGlite in a folder (opened again by each instance, as a restarted process would).
 */
async function durableDatabase(kind: DbKind): Promise<{ open(): Promise<Database>; drop(): Promise<void> }> {
  if (kind === 'postgres') {
    const test: TestDatabase = await createTestDatabase('postgres');
    return { open: async () => openPostgres(test.url as string, 5), drop: () => test.drop() };
  }
  const dir = tempDir('gatehouse-outbox-db-');
  const dump = await migratedPgliteDump();
  let first = true;
  return {
    async open() {
      const db = await openPglite(path.join(dir, 'db'), first ? dump : undefined);
      first = false;
      return db;
    },
    async drop() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function unsent(db: Database): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'TestUnsent',
    'SELECT count(*)::int AS n FROM auth.email_outbox WHERE sent_at IS NULL',
  );
  return rows[0]?.n ?? 0;
}

for (const kind of dbKinds()) {
  describe(`the outbox across a restart [${kind}]`, () => {
    let smtp: TestSmtp;
    let dataDir: string;
    let database: Awaited<ReturnType<typeof durableDatabase>>;
    before(async () => {
      smtp = await startSmtp();
      dataDir = tempDir();
      database = await durableDatabase(kind);
    });
    after(async () => {
      await smtp.stop();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('an email queued while SMTP was down is delivered once by the next start, and its link works', async () => {
      await smtp.stop();
      const first = await startInstance(await database.open(), dataDir, smtp.port);
      const email = 'restart@example.com';
      try {
        const reg = await first.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        assert.equal(reg.statusCode, 200, reg.body);
        await waitFor('a failed attempt', async () => {
          const { rows } = await first.ctx.db.query<{ e: string | null }>(
            'TestLastError',
            'SELECT last_error AS e FROM auth.email_outbox WHERE recipient = $1',
            [email],
          );
          return (rows[0]?.e ?? null) !== null;
        });
      } finally {
        await first.close();
      }
      await smtp.start();
      const second = await startInstance(await database.open(), dataDir, smtp.port);
      try {
        await waitFor('the delivery', () => smtp.to(email).length > 0);
        await sleep(500);
        assert.equal(smtp.to(email).length, 1, 'delivered exactly once');
        const follow = await second.app.inject({
          method: 'GET',
          url: pathOf(findLink(smtp.last(email).text, '/auth/activate')),
        });
        assert.match(String(follow.headers.location), /^http:\/\/app\.test\/signed-in\?.*refresh_token=/);
      } finally {
        await second.close();
      }
    });

    it('a lost-password request answered 204 just before a crash is mailed once by the next start', async () => {
      const email = 'crashed@example.com';
      const first = await startInstance(await database.open(), dataDir, smtp.port);
      try {
        const reg = await first.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        assert.equal(reg.statusCode, 200);
        await waitFor('the activation email', () => smtp.to(email).length === 1);
        const activated = await first.app.inject({
          method: 'GET',
          url: pathOf(findLink(smtp.last(email).text, '/auth/activate')),
        });
        assert.equal(activated.statusCode, 302);
        // The instance dies right after answering: its sender never gets to the request.
        first.ctx.outbox.stop();
        const res = await first.app.inject({
          method: 'POST',
          url: '/auth/change-password/request',
          payload: { email },
        });
        assert.equal(res.statusCode, 204);
      } finally {
        await first.close();
      }
      assert.equal(smtp.to(email).length, 1, 'nothing sent by the stopped instance');
      const second = await startInstance(await database.open(), dataDir, smtp.port);
      try {
        await waitFor('the reset email', () => smtp.to(email).length === 2);
        await sleep(500);
        assert.equal(smtp.to(email).length, 2);
        assert.equal(smtp.last(email).subject, 'Reset your password');
        assert.equal(await unsent(second.ctx.db), 0);
      } finally {
        await second.close();
      }
    });

    it('a row held by a sender that died is left alone while its claim lasts, then sent once by another', async () => {
      const email = 'orphan@example.com';
      const first = await startInstance(await database.open(), dataDir, smtp.port);
      try {
        first.ctx.outbox.stop();
        const reg = await first.app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email, password: 'pw-123456' },
        });
        assert.equal(reg.statusCode, 200);
        // A sender claims the row for ten minutes and dies before delivering it.
        const claimed = await claimDueRows(first.ctx.db, 'sender-that-died', 600_000, 10);
        assert.deepEqual(
          claimed.map((r) => r.recipient),
          [email],
        );
      } finally {
        await first.close();
      }
      const second = await startInstance(await database.open(), dataDir, smtp.port);
      try {
        second.ctx.outbox.wake();
        await second.ctx.tasks.idle();
        await sleep(300);
        assert.equal(smtp.to(email).length, 0, 'not while the claim lasts');
        // The claim runs out.
        await second.ctx.db.query(
          'TestExpireClaim',
          `UPDATE auth.email_outbox SET claimed_until = now() - interval '1 millisecond' WHERE recipient = $1`,
          [email],
        );
        await waitFor('the delivery', () => smtp.to(email).length > 0);
        await sleep(500);
        assert.equal(smtp.to(email).length, 1);
      } finally {
        await second.close();
      }
    });
  });
}

if (runsHere('postgres', 'two instances sharing one PostgreSQL database')) {
  describe('two instances on one PostgreSQL database', () => {
    let smtp: TestSmtp;
    let test: TestDatabase;
    let a: Instance;
    let b: Instance;
    const dirs: string[] = [];
    before(async () => {
      smtp = await startSmtp();
      test = await createTestDatabase('postgres');
      dirs.push(tempDir(), tempDir());
      a = await startInstance(openPostgres(test.url as string, 5), dirs[0] as string, smtp.port);
      b = await startInstance(openPostgres(test.url as string, 5), dirs[1] as string, smtp.port);
    });
    after(async () => {
      await a?.close();
      await b?.close();
      await smtp.stop();
      await test?.drop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    it('sends each email exactly once, whether queued while SMTP was down or while it is up', async () => {
      const emails = Array.from({ length: 40 }, (_, i) => `shared-${i}@example.com`);
      const register = (i: number) =>
        (i % 2 === 0 ? a : b).app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: { email: emails[i], password: 'pw-123456' },
        });
      // Half while SMTP is down: both senders then retry the same rows at the same moments.
      await smtp.stop();
      try {
        for (let i = 0; i < 20; i++) assert.equal((await register(i)).statusCode, 200);
        await sleep(300);
      } finally {
        await smtp.start();
      }
      // Half while it is up, in parallel, from both instances.
      const answers = await Promise.all(emails.slice(20).map((_, j) => register(20 + j)));
      assert.deepEqual(
        answers.map((r) => r.statusCode),
        Array(20).fill(200),
      );
      await waitFor('every email', () => emails.every((e) => smtp.to(e).length > 0), 30_000);
      // Many polls and retries of both instances later.
      await sleep(1000);
      const counts = emails.map((e) => smtp.to(e).length);
      if (counts.some((c) => c !== 1)) {
        const { rows } = await a.ctx.db.query(
          'dbg',
          'SELECT recipient, attempts, last_error, sent_at FROM auth.email_outbox ORDER BY id',
        );
        console.log(counts, rows);
      }
      assert.deepEqual(counts, Array(40).fill(1), 'one email per registration');
      assert.equal(smtp.messages.length, 40);
      assert.equal(await unsent(a.ctx.db), 0);
    });
  });
}
