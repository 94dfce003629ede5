/**
 * A start with the wrong MFA encryption key (a copied .env.example, another DATA_DIR) is refused with a
 * message that names the setting and what to do, instead of answering 500 at the sign-in that meets the
 * first secret it cannot open (issue 26).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { SealedKeyMismatch } from '../../src/auth/startup.ts';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import type { Database } from '../../src/db/database.ts';
import { startFailure } from '../../src/server.ts';
import { HS } from '../auth/helpers.ts';
import { createAccount, newEmail } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp, tempDir } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';
import { authenticatorCode } from './helpers.ts';

const KEY_A = 'the first mfa encryption secret';
const KEY_B = 'a .env.example mfa encryption secret';
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const PASSWORD = 'a long enough password';
const silent = pino({ level: 'silent' });

/** The database as a context sees it, except that closing the context leaves it open for the next start. */
function kept(db: Database): Database {
  return new Proxy(db, {
    get(target, p) {
      if (p === 'close') return async () => {};
      const v = Reflect.get(target, p, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

for (const kind of dbKinds()) {
  describe(`a start with another MFA encryption key than the one that sealed the secrets [${kind}]`, () => {
    const dataDir = tempDir();
    const clock = new TestClock(Date.UTC(2026, 0, 1));
    let database: TestDatabase;
    let email: string;
    const settings = (over: ConfigOverrides): ConfigOverrides => ({
      ...HS,
      DATA_DIR: dataDir,
      CUSTOM_DIR: path.join(dataDir, 'custom'),
      LOG_LEVEL: 'silent',
      ARGON2_MEMORY_COST: 1024,
      ARGON2_TIME_COST: 1,
      ...over,
    });

    before(async () => {
      database = await createTestDatabase(kind);
      // A first start under key A seals an MFA user's secret (HBP's clear secret, re-sealed at start).
      const ctx = await createContext(configFrom(settings({ MFA_ENCRYPTION_KEY: KEY_A })), {
        log: silent,
        clock,
        db: kept(database.db),
      });
      try {
        email = newEmail('sealed');
        const { accountId } = await createAccount({ ctx } as TestApp, { email, password: PASSWORD });
        await ctx.db.query(
          'test-mfa-user',
          'UPDATE auth.accounts SET otp_secret = $2, mfa_enabled = true WHERE id = $1',
          [accountId, SECRET],
        );
      } finally {
        await closeContext(ctx);
      }
      const reseal = await createContext(configFrom(settings({ MFA_ENCRYPTION_KEY: KEY_A })), {
        log: silent,
        clock,
        db: kept(database.db),
      });
      const { rows } = await reseal.db.query<{ otp_secret: string }>(
        'test-sealed',
        'SELECT otp_secret FROM auth.accounts WHERE email = $1',
        [email],
      );
      assert.match(String(rows[0]?.otp_secret), /^gh1:/, 'the secret is sealed under key A');
      await closeContext(reseal);
    });
    after(() => database.drop());

    it('refuses to start under key B, naming MFA_ENCRYPTION_KEY and what to do', async () => {
      const config = configFrom(settings({ MFA_ENCRYPTION_KEY: KEY_B }));
      const err = await createContext(config, { log: silent, clock, db: kept(database.db) }).then(
        () => assert.fail('the start must be refused'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SealedKeyMismatch, String(err));
      const message = startFailure(err, config);
      assert.ok(message, 'main.ts prints it as a start failure, without a stack');
      assert.match(message, /1 TOTP secrets \(MFA\) under key id [0-9a-f]{12}/);
      assert.match(message, /MFA_ENCRYPTION_KEY is set \(from the environment or a \.env file\)/);
      assert.match(message, /MFA_ENCRYPTION_PREVIOUS_KEYS/);
      assert.ok(!message.includes(KEY_A) && !message.includes(KEY_B), 'no secret in the message');
    });

    it('refuses to start on the generated development secret too, naming its file', async () => {
      const config = configFrom(settings({}));
      await assert.rejects(
        createContext(config, { log: silent, clock, db: kept(database.db) }),
        (e: Error) =>
          e instanceof SealedKeyMismatch &&
          e.message.includes(`MFA_ENCRYPTION_KEY is unset, so the secret generated in ${dataDir}/keys`),
      );
    });

    it('starts with key A kept as a previous key, and the MFA sign-in answers 200, never 500', async () => {
      let t: TestApp | undefined;
      try {
        t = await buildTestApp(
          kind,
          settings({ MFA_ENCRYPTION_KEY: KEY_B, MFA_ENCRYPTION_PREVIOUS_KEYS: [KEY_A] }),
          { clock, database },
        );
        const login = await t.app.inject({
          method: 'POST',
          url: '/auth/login',
          payload: { email, password: PASSWORD },
        });
        assert.equal(login.statusCode, 200, login.body);
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/mfa/totp',
          payload: { ticket: login.json().ticket, code: authenticatorCode(SECRET, clock.now().getTime()) },
        });
        assert.equal(res.statusCode, 200, res.body);
      } finally {
        // Drops the database too (its close owns the database given).
        await t?.close();
      }
    });
  });
}
