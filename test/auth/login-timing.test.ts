/**
 * A failed sign-in must not tell whether the email has an account, nor what kind of hash it holds: every
 * failure does the same hashing work. Asserted on which verifications ran (the hashing pool reports each
 * one), not on wall-clock time, which a busy 2-core machine makes too noisy to tell bcrypt from argon2.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  configuredKind,
  hashKind,
  observeVerifications,
  Passwords,
  type VerificationEvent,
} from '../../src/auth/passwords.ts';
import { HASH_KINDS_TTL_MS } from '../../src/auth/sign-in.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { HS, login, newEmail, signUp } from './helpers.ts';

// bcryptjs at cost 4 keeps the suite fast; the dummy must then be a cost-4 bcrypt too.
const LEGACY = '$2b$04$2ePIgaB9m9wEanECf6nFBO.g3D1TUDxonhL7H6H/1leX3ibsirN.W'; // bcrypt('hbp password', 4)
const BCRYPT_KIND = 'bcrypt$04';

for (const kind of dbKinds()) {
  describe(`failed sign-ins cost the same whatever the account [${kind}]`, () => {
    let t: TestApp;
    let current: string;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false });
      current = configuredKind(t.config);
    });
    after(() => t.close());

    const setHash = (email: string, hash: string | null) =>
      t.ctx.db.query('t', 'UPDATE auth.accounts SET password_hash = $2 WHERE email = $1', [email, hash]);

    /** The verifications one sign-in ran, and its status. */
    async function attempt(email: string, password: string) {
      const seen: VerificationEvent[] = [];
      const stop = observeVerifications((e) => seen.push(e));
      try {
        const res = await login(t, { email, password, cookie: false });
        return { status: res.statusCode, seen, kinds: seen.map((e) => e.kind).sort() };
      } finally {
        stop();
      }
    }

    /** Lets the cached list of hash kinds expire, so the next failure reads the database again. */
    const expireKinds = () => t.clock.advance(HASH_KINDS_TTL_MS + 1);

    it('verifies the legacy fixture as bcrypt cost 4', () => {
      assert.equal(hashKind(LEGACY), BCRYPT_KIND);
    });

    it('with only current hashes, any failure costs one argon2id verification', async () => {
      expireKinds();
      const s = await signUp(t);
      const unknown = await attempt(newEmail('nobody'), 'wrong');
      const wrong = await attempt(s.email, 'wrong');
      assert.equal(unknown.status, 401);
      assert.equal(wrong.status, 401);
      assert.deepEqual(unknown.seen, [{ kind: current, dummy: true }]);
      assert.deepEqual(wrong.seen, [{ kind: current, dummy: false }]);
    });

    it('while a bcrypt hash remains, every failure costs one bcrypt and one argon2id verification', async () => {
      const legacy = await signUp(t);
      await setHash(legacy.email, LEGACY);
      const plain = await signUp(t);
      const noPassword = await signUp(t);
      await setHash(noPassword.email, null);
      expireKinds();

      const unknown = await attempt(newEmail('nobody'), 'wrong');
      const wrongLegacy = await attempt(legacy.email, 'wrong');
      const wrongCurrent = await attempt(plain.email, 'wrong');
      const withoutPassword = await attempt(noPassword.email, 'wrong');
      const expected = [BCRYPT_KIND, current].sort();
      for (const r of [unknown, wrongLegacy, wrongCurrent, withoutPassword]) {
        assert.equal(r.status, 401);
        assert.deepEqual(r.kinds, expected);
      }
      // The account's own hash is checked for real; the rest is padding.
      assert.deepEqual(
        wrongLegacy.seen.filter((e) => !e.dummy),
        [{ kind: BCRYPT_KIND, dummy: false }],
      );
      assert.deepEqual(
        wrongCurrent.seen.filter((e) => !e.dummy),
        [{ kind: current, dummy: false }],
      );
      assert.ok(unknown.seen.every((e) => e.dummy));
      assert.ok(withoutPassword.seen.every((e) => e.dummy));

      // A success costs one verification (then a rehash), with no padding.
      const ok = await attempt(legacy.email, 'hbp password');
      assert.equal(ok.status, 200);
      assert.deepEqual(ok.seen, [{ kind: BCRYPT_KIND, dummy: false }]);

      // That was the last bcrypt hash: once the cached list expires, failures cost argon2id alone again.
      const stillCached = await attempt(newEmail('nobody'), 'wrong');
      assert.deepEqual(stillCached.kinds, expected);
      expireKinds();
      const after = await attempt(newEmail('nobody'), 'wrong');
      assert.deepEqual(after.seen, [{ kind: current, dummy: true }]);
    });

    it('pads to hashes made with earlier ARGON2_* settings too', async () => {
      const older = { ...t.config, ARGON2_MEMORY_COST: 2048 };
      const s = await signUp(t);
      const olderPasswords = new Passwords(older);
      await setHash(s.email, await olderPasswords.hash('older settings'));
      await olderPasswords.close();
      expireKinds();
      const expected = [configuredKind(older), current].sort();
      const unknown = await attempt(newEmail('nobody'), 'wrong');
      const wrongOlder = await attempt(s.email, 'wrong');
      assert.deepEqual(unknown.kinds, expected);
      assert.deepEqual(wrongOlder.kinds, expected);
      // The right password signs in and replaces the hash with the configured kind.
      assert.equal((await attempt(s.email, 'older settings')).status, 200);
      expireKinds();
      assert.deepEqual((await attempt(newEmail('nobody'), 'wrong')).kinds, [current]);
    });

    it('picks up hashes written by something else only after the cached list expires', async () => {
      expireKinds();
      const first = await attempt(newEmail('nobody'), 'wrong');
      assert.deepEqual(first.kinds, [current]);
      const s = await signUp(t);
      await setHash(s.email, LEGACY);
      assert.deepEqual((await attempt(newEmail('nobody'), 'wrong')).kinds, [current]);
      expireKinds();
      assert.deepEqual((await attempt(newEmail('nobody'), 'wrong')).kinds, [BCRYPT_KIND, current].sort());
      await setHash(s.email, null);
    });
  });
}
