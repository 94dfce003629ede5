import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import QRCode from 'qrcode';
import {
  disableMfa,
  enableMfa,
  generateMfaSecret,
  type MfaDeps,
  resealSecrets,
} from '../../src/auth/mfa/mfa.ts';
import { SecretBox } from '../../src/auth/mfa/secret-box.ts';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { dbKinds } from '../helpers/db.ts';
import {
  accessToken,
  authenticatorCode,
  createAccount,
  enableFor,
  post,
  type TestAccount,
  wrongCode,
} from './helpers.ts';

// Five seconds into a 30-second step, so a few seconds of test time never cross a step by accident.
const START = Date.parse('2026-03-01T10:00:05Z');

async function accountRow(t: TestApp, accountId: string) {
  const { rows } = await t.ctx.db.query<{ otp_secret: string | null; mfa_enabled: boolean }>(
    'test-account-mfa',
    'SELECT otp_secret, mfa_enabled FROM auth.accounts WHERE id = $1',
    [accountId],
  );
  return rows[0] as { otp_secret: string | null; mfa_enabled: boolean };
}

for (const kind of dbKinds()) {
  describe(`MFA generate, enable, disable [${kind}]`, () => {
    let t: TestApp;
    let n = 0;
    const now = () => t.clock.now().getTime();
    const newAccount = () => createAccount(t, `mfa-user-${++n}@example.com`);
    const nextStep = () => t.clock.advance(30_000);

    before(async () => {
      t = await buildTestApp(kind, { ...HS, OTP_ISSUER: 'Gatehouse Test' }, { clock: new TestClock(START) });
    });
    after(() => t.close());

    it('generate returns a base32 secret and the QR code of its otpauth URI with issuer and email', async () => {
      const a = await newAccount();
      const res = await post(t, '/auth/mfa/generate', undefined, a.token);
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['image_url', 'otp_secret']);
      assert.match(body.otp_secret, /^[A-Z2-7]{32}$/);
      assert.match(body.image_url, /^data:image\/png;base64,/);
      const png = Buffer.from(body.image_url.slice('data:image/png;base64,'.length), 'base64');
      assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      const uri = `otpauth://totp/Gatehouse%20Test:${encodeURIComponent(a.email)}?secret=${body.otp_secret}&issuer=Gatehouse%20Test&algorithm=SHA1&digits=6&period=30`;
      assert.equal(body.image_url, await QRCode.toDataURL(uri, { errorCorrectionLevel: 'M' }));
      const { rows } = await t.ctx.db.query<{ pending_secret: string }>(
        'test-pending',
        'SELECT pending_secret FROM auth.account_mfa WHERE account_id = $1',
        [a.accountId],
      );
      const pending = String(rows[0]?.pending_secret);
      assert.match(pending, /^gh1:/);
      assert.ok(!pending.includes(body.otp_secret), 'the pending secret is not stored in clear');
    });

    it('generate answers 400 to a body with fields', async () => {
      const a = await newAccount();
      const res = await post(t, '/auth/mfa/generate', { secret: 'MINE' }, a.token);
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().message, '"secret" is not allowed');
    });

    it('enable accepts a secret that HBP generated but never enabled, and stores it encrypted', async () => {
      const a = await newAccount();
      const clear = 'KRSXG5CTMVRXEZLUKRSXG5CTMVRXEZLU';
      await t.ctx.db.query('test-hbp-pending', 'UPDATE auth.accounts SET otp_secret = $2 WHERE id = $1', [
        a.accountId,
        clear,
      ]);
      const res = await post(t, '/auth/mfa/enable', { code: authenticatorCode(clear, now()) }, a.token);
      assert.equal(res.statusCode, 204, res.body);
      const row = await accountRow(t, a.accountId);
      assert.equal(row.mfa_enabled, true);
      assert.match(String(row.otp_secret), /^gh1:/);
      nextStep();
    });

    it('generate, enable and disable answer 401 without a signed-in user', async () => {
      for (const [url, body] of [
        ['/auth/mfa/generate', undefined],
        ['/auth/mfa/enable', { code: '123456' }],
        ['/auth/mfa/disable', { code: '123456' }],
      ] as const) {
        const res = await post(t, url, body);
        assert.equal(res.statusCode, 401, url);
        assert.equal(res.json().code, 'UNAUTHENTICATED');
      }
    });

    it('enable turns MFA on with a code from the pending secret, and stores the secret encrypted', async () => {
      const a = await newAccount();
      const gen = await post(t, '/auth/mfa/generate', undefined, a.token);
      const secret = gen.json().otp_secret as string;
      assert.equal((await accountRow(t, a.accountId)).otp_secret, null, 'generate does not activate');
      const res = await post(t, '/auth/mfa/enable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(res.statusCode, 204);
      assert.equal(res.body, '');
      const row = await accountRow(t, a.accountId);
      assert.equal(row.mfa_enabled, true);
      assert.match(String(row.otp_secret), /^gh1:[0-9a-f]{12}:[\w-]+:[\w-]+:[\w-]+$/);
      assert.ok(!String(row.otp_secret).includes(secret), 'the base32 secret is not stored in clear');
      const { rows } = await t.ctx.db.query<{ pending_secret: string | null }>(
        'test-pending',
        'SELECT pending_secret FROM auth.account_mfa WHERE account_id = $1',
        [a.accountId],
      );
      assert.equal(rows[0]?.pending_secret, null);
    });

    it('enable answers 400 when MFA is already enabled', async () => {
      const a = await newAccount();
      const secret = await enableFor(t, a);
      nextStep();
      const res = await post(t, '/auth/mfa/enable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().code, 'MFA_ALREADY_ENABLED');
    });

    it('enable answers 400 when no secret was generated', async () => {
      const a = await newAccount();
      const res = await post(t, '/auth/mfa/enable', { code: '123456' }, a.token);
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().code, 'OTP_SECRET_NOT_SET');
    });

    it('enable answers 401 for a wrong code and leaves MFA off', async () => {
      const a = await newAccount();
      const secret = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret;
      const res = await post(t, '/auth/mfa/enable', { code: wrongCode(secret, now()) }, a.token);
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().code, 'INVALID_TOTP');
      assert.equal((await accountRow(t, a.accountId)).mfa_enabled, false);
    });

    it('accepts codes one step early or late, and refuses codes two steps away', async () => {
      const a = await newAccount();
      const secret = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret;
      for (const offset of [-2, 2]) {
        const res = await post(
          t,
          '/auth/mfa/enable',
          { code: authenticatorCode(secret, now(), offset) },
          a.token,
        );
        assert.equal(res.statusCode, 401, `offset ${offset}`);
      }
      const early = await post(
        t,
        '/auth/mfa/enable',
        { code: authenticatorCode(secret, now(), -1) },
        a.token,
      );
      assert.equal(early.statusCode, 204);
      const late = await post(t, '/auth/mfa/disable', { code: authenticatorCode(secret, now(), 1) }, a.token);
      assert.equal(late.statusCode, 204);
    });

    it('refuses a code that was already accepted (replay), and accepts the next step', async () => {
      const a = await newAccount();
      const secret = await enableFor(t, a);
      const code = authenticatorCode(secret, now());
      const replay = await post(t, '/auth/mfa/disable', { code }, a.token);
      assert.equal(replay.statusCode, 401);
      assert.equal(replay.json().code, 'INVALID_TOTP');
      t.clock.advance(20_000); // same code, still inside its ±1 window
      assert.equal((await post(t, '/auth/mfa/disable', { code }, a.token)).statusCode, 401);
      t.clock.advance(10_000);
      const fresh = await post(t, '/auth/mfa/disable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(fresh.statusCode, 204);
    });

    it('generate while MFA is enabled leaves the active secret working until disable', async () => {
      const a = await newAccount();
      const active = await enableFor(t, a);
      const before = (await accountRow(t, a.accountId)).otp_secret;
      const pending = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret as string;
      assert.notEqual(pending, active);
      assert.equal((await accountRow(t, a.accountId)).otp_secret, before, 'active secret untouched');
      nextStep();
      const withPending = await post(t, '/auth/mfa/disable', { code: wrongCode(active, now()) }, a.token);
      assert.equal(withPending.statusCode, 401);
      const withActive = await post(
        t,
        '/auth/mfa/disable',
        { code: authenticatorCode(active, now()) },
        a.token,
      );
      assert.equal(withActive.statusCode, 204);
    });

    it('disable turns MFA off and forgets the secrets; a second disable answers 400', async () => {
      const a = await newAccount();
      const secret = await enableFor(t, a);
      nextStep();
      const res = await post(t, '/auth/mfa/disable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(res.statusCode, 204);
      assert.deepEqual(await accountRow(t, a.accountId), { otp_secret: null, mfa_enabled: false });
      nextStep();
      const again = await post(t, '/auth/mfa/disable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(again.statusCode, 400);
      assert.equal(again.json().code, 'MFA_ALREADY_DISABLED');
    });

    it('answers 400 and changes nothing for malformed codes', async () => {
      const a = await newAccount();
      const secret = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret;
      const cases: [unknown, string][] = [
        [{ code: 'abcdef' }, '"code" has an invalid format'],
        [{ code: '12 456' }, '"code" has an invalid format'],
        [{ code: '12345' }, '"code" length must be at least 6 characters long'],
        [{ code: '1234567' }, '"code" length must be less than or equal to 6 characters long'],
        [{ code: Number(authenticatorCode(secret, now()).replace(/^0/, '1')) }, '"code" must be a string'],
        [{}, '"code" is required'],
        [{ code: '123456', extra: 1 }, '"extra" is not allowed'],
      ];
      for (const [body, message] of cases) {
        const res = await post(t, '/auth/mfa/enable', body, a.token);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().message, message);
      }
      assert.equal((await accountRow(t, a.accountId)).mfa_enabled, false);
    });

    it('limits wrong codes per account: beyond the limit even the right code gets 429 until the window ends', async () => {
      const a = await newAccount();
      const secret = (await post(t, '/auth/mfa/generate', undefined, a.token)).json().otp_secret as string;
      for (let i = 0; i < t.config.RATE_LIMIT_MFA_ACCOUNT_MAX; i++) {
        const res = await post(t, '/auth/mfa/enable', { code: wrongCode(secret, now()) }, a.token);
        assert.equal(res.statusCode, 401);
      }
      const limited = await post(t, '/auth/mfa/enable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(limited.statusCode, 429);
      assert.equal(limited.json().code, 'RATE_LIMITED');
      const retryAfter = Number(limited.headers['retry-after']);
      assert.ok(
        retryAfter > 0 && retryAfter <= t.config.RATE_LIMIT_MFA_ACCOUNT_WINDOW / 1000,
        String(retryAfter),
      );
      t.clock.advance(t.config.RATE_LIMIT_MFA_ACCOUNT_WINDOW);
      a.token = await accessToken(t, a.userId); // the old one expired meanwhile
      const ok = await post(t, '/auth/mfa/enable', { code: authenticatorCode(secret, now()) }, a.token);
      assert.equal(ok.statusCode, 204);
    });

    describe('secrets at rest', () => {
      const deps = (box: SecretBox): MfaDeps => ({ ...t.ctx, box });
      // Calls made straight to the domain, as by a caller who has just signed in.
      const justSignedIn = () => ({
        authTime: Math.floor(now() / 1000),
        guesses: t.app.guesses,
        address: '127.0.0.1',
      });
      let a: TestAccount;

      it('re-encrypts a secret HBP stored in clear, which keeps working', async () => {
        a = await newAccount();
        const clear = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
        await t.ctx.db.query(
          'test-hbp-secret',
          'UPDATE auth.accounts SET otp_secret = $2, mfa_enabled = true WHERE id = $1',
          [a.accountId, clear],
        );
        const box = SecretBox.fromConfig(t.config);
        const { resealed } = await resealSecrets(deps(box));
        assert.ok(resealed >= 1);
        const stored = String((await accountRow(t, a.accountId)).otp_secret);
        assert.ok(box.isCurrent(stored));
        assert.ok(!stored.includes(clear));
        nextStep();
        await disableMfa(deps(box), a.userId, authenticatorCode(clear, now()), justSignedIn());
        assert.equal((await accountRow(t, a.accountId)).mfa_enabled, false);
      });

      it('rotates keys: secrets sealed under a previous key open, and are re-sealed under the new one', async () => {
        a = await newAccount();
        const oldBox = new SecretBox('the old mfa encryption secret');
        const { otp_secret } = await generateMfaSecret(deps(oldBox), a.userId, justSignedIn());
        nextStep();
        await enableMfa(deps(oldBox), a.userId, authenticatorCode(otp_secret, now()), justSignedIn());
        const rotated = new SecretBox('the new mfa encryption secret', ['the old mfa encryption secret']);
        assert.ok(!rotated.isCurrent(String((await accountRow(t, a.accountId)).otp_secret)));
        await resealSecrets(deps(rotated));
        const stored = String((await accountRow(t, a.accountId)).otp_secret);
        assert.ok(rotated.isCurrent(stored));
        nextStep();
        await disableMfa(
          deps(new SecretBox('the new mfa encryption secret')),
          a.userId,
          authenticatorCode(otp_secret, now()),
          justSignedIn(),
        );
      });

      it('does not open a secret copied from another account row', async () => {
        const victim = await newAccount();
        const attacker = await newAccount();
        const secret = await enableFor(t, attacker);
        await enableFor(t, victim);
        await t.ctx.db.query(
          'test-copy-secret',
          `UPDATE auth.accounts SET otp_secret = (SELECT otp_secret FROM auth.accounts WHERE id = $2) WHERE id = $1`,
          [victim.accountId, attacker.accountId],
        );
        nextStep();
        const res = await post(
          t,
          '/auth/mfa/disable',
          { code: authenticatorCode(secret, now()) },
          victim.token,
        );
        assert.equal(res.statusCode, 500);
        assert.equal(res.json().code, 'INTERNAL');
      });
    });
  });
}
