/**
 * Key rotation (issue 21): keys carry a kid, /auth/jwks publishes the retired key beside the new one
 * until the tokens it signed have expired, the old key keeps signing until verifiers' cached JWKS must
 * hold the new one, and tokens verify across a rotation made with JWT_PREVIOUS_KEY or with
 * `gatehouse keys rotate`. The JWKS is cacheable for JWKS_MAX_AGE seconds (Hasura refreshes on it).
 */
import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { type CryptoKey, createLocalJWKSet, decodeProtectedHeader, jwtVerify, SignJWT } from 'jose';
import { kidOf } from '../../src/auth/keys.ts';
import type { CliIO } from '../../src/cli/command.ts';
import { runCli } from '../../src/cli/main.ts';
import { ConfigError, configFrom, loadConfig } from '../../src/config.ts';
import { accessToken } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp, tempDir, testRsaKey } from '../helpers/app.ts';
import { TestClock } from '../helpers/clock.ts';
import { userIdFor } from '../storage/helpers.ts';
import { bearer } from './helpers.ts';

/** A 2048-bit RSA private key, a different one on each call (from the suites' pool, see helpers/app.ts). */
const pem = () => testRsaKey();
const publicOf = (privatePem: string) =>
  createPublicKey(privatePem).export({ format: 'pem', type: 'spki' }) as string;

const ALICE = userIdFor('alice');
const T0 = new Date('2026-03-01T12:00:00Z');

/** A request that needs a valid access token and nothing in the database: the caller's own folder. */
const asAlice = (t: TestApp, jwt: string) =>
  t.app.inject({ method: 'GET', url: `/storage/m/user/${ALICE}/`, headers: bearer(jwt) });

async function jwksOf(t: TestApp) {
  const res = await t.app.inject({ method: 'GET', url: '/auth/jwks' });
  assert.equal(res.statusCode, 200);
  return { res, kids: (res.json().keys as { kid: string }[]).map((k) => k.kid) };
}

describe('key rotation', () => {
  const apps: TestApp[] = [];
  const dirs: string[] = [];
  // A test's apps close when it ends, so that their databases go back to the pool for the next test
  // (an app left open until the end of the suite costs a fresh PGlite each).
  afterEach(async () => {
    for (const a of apps.splice(0)) await a.close();
  });
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const app = async (overrides: ConfigOverrides, clock = new TestClock(T0.getTime())) => {
    const t = await buildTestApp('pglite', { RATE_LIMIT_ENABLED: false, ...overrides }, { clock });
    apps.push(t);
    return t;
  };

  it('serves /auth/jwks with Cache-Control: public, max-age=JWKS_MAX_AGE (no-store keeps Hasura from refreshing)', async () => {
    const t = await app({ JWT_KEY: pem(), JWKS_MAX_AGE: 120 });
    const { res, kids } = await jwksOf(t);
    assert.equal(res.headers['cache-control'], 'public, max-age=120');
    assert.equal(res.headers.pragma, undefined);
    assert.deepEqual(kids, [t.ctx.keys.kid]);
    const other = await t.app.inject({ method: 'POST', url: '/auth/login', payload: {} });
    assert.match(String(other.headers['cache-control']), /no-store/, 'other auth answers stay no-store');
    const hs = await app({ JWT_ALGORITHM: 'HS256', JWT_KEY: 'k'.repeat(32) });
    const none = await hs.app.inject({ method: 'GET', url: '/auth/jwks' });
    assert.equal(none.statusCode, 501);
    assert.match(String(none.headers['cache-control']), /no-store/);
  });

  it('with JWT_PREVIOUS_KEY (public) the new key signs at once, both are published, and old tokens still verify', async () => {
    const oldKey = pem();
    const before = await app({ JWT_KEY: oldKey });
    const oldToken = await accessToken(before, ALICE);
    const t = await app({ JWT_KEY: pem(), JWT_PREVIOUS_KEY: publicOf(oldKey) });
    const { kids } = await jwksOf(t);
    assert.deepEqual(
      kids,
      [t.ctx.keys.kid, await kidOf(oldKey)],
      'the signing key first, the retired one beside it',
    );
    assert.equal((await asAlice(t, oldToken)).statusCode, 200, 'a token of the old key still works');
    const fresh = await accessToken(t, ALICE);
    assert.equal(decodeProtectedHeader(fresh).kid, t.ctx.keys.kid);
    assert.equal((await asAlice(t, fresh)).statusCode, 200);
    // Any verifier holding this JWKS accepts both.
    const set = createLocalJWKSet((await jwksOf(t)).res.json());
    for (const token of [oldToken, fresh]) await jwtVerify(token, set, { currentDate: T0 });
  });

  it('with JWT_KEY_ROTATED_AT the old key signs for JWKS_MAX_AGE more, then the new one; the old is dropped JWT_EXPIRES_IN later', async () => {
    const oldKey = pem();
    const clock = new TestClock(T0.getTime());
    const before = await app({ JWT_KEY: oldKey }, clock);
    const beforeToken = await accessToken(before, ALICE);
    const t = await app(
      {
        JWT_KEY: pem(),
        JWT_PREVIOUS_KEY: oldKey,
        JWT_KEY_ROTATED_AT: T0.toISOString(),
        JWKS_MAX_AGE: 300,
        JWT_EXPIRES_IN: 15,
      },
      clock,
    );
    const oldKid = await kidOf(oldKey);
    const newKid = t.ctx.keys.kid;

    // Published at once, but a verifier may still hold the JWKS it fetched before: the old key signs.
    assert.deepEqual((await jwksOf(t)).kids, [oldKid, newKid]);
    const during = await accessToken(t, ALICE);
    assert.equal(decodeProtectedHeader(during).kid, oldKid);

    clock.set(new Date(T0.getTime() + 300_000));
    const afterSwitch = await accessToken(t, ALICE);
    assert.equal(decodeProtectedHeader(afterSwitch).kid, newKid, 'the new key signs once every cache has it');
    assert.deepEqual((await jwksOf(t)).kids, [newKid, oldKid]);
    assert.equal((await asAlice(t, during)).statusCode, 200, 'tokens of the old key still verify');

    // The last token of the old key expires at T0 + 300 s + 15 min; after that it is gone everywhere.
    clock.set(new Date(T0.getTime() + 300_000 + 15 * 60_000));
    assert.deepEqual((await jwksOf(t)).kids, [newKid]);
    const stale = await asAlice(t, beforeToken);
    assert.equal(stale.statusCode, 401);
    assert.match(stale.json().message, /signed with a key this service does not accept/);
    assert.equal((await asAlice(t, await accessToken(t, ALICE))).statusCode, 200);
  });

  it('accepts a token of the current key that names it by another kid (as HBP may have), and no other', async () => {
    const key = pem();
    const t = await app({ JWT_KEY: key });
    const now = Math.floor(T0.getTime() / 1000);
    const claims = {
      'https://hasura.io/jwt/claims': {
        'x-hasura-user-id': ALICE,
        'x-hasura-allowed-roles': ['user'],
        'x-hasura-default-role': 'user',
      },
    };
    const signed = (kid: string, k: CryptoKey) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid })
        .setIssuer('nhost')
        .setIssuedAt(now)
        .setExpirationTime(now + 600)
        .sign(k);
    assert.equal(
      (await asAlice(t, await signed('named-elsewhere', t.ctx.keys.signCryptoKey))).statusCode,
      200,
    );
    const stranger = await app({ JWT_KEY: pem() });
    const foreign = await asAlice(t, await signed('named-elsewhere', stranger.ctx.keys.signCryptoKey));
    assert.equal(foreign.statusCode, 401);
    assert.match(
      foreign.json().message,
      /signed with a key this service does not accept \(kid 'named-elsewhere'/,
    );
  });

  it('refuses JWT_PREVIOUS_KEY that is not a key of the algorithm, or that comes with a shared secret', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({
      format: 'pem',
      type: 'pkcs8',
    }) as string;
    const problems = (values: ConfigOverrides) => {
      try {
        configFrom(values);
        return [];
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.problems;
      }
    };
    assert.deepEqual(problems({ JWT_KEY: pem(), JWT_PREVIOUS_KEY: 'nope' }), [
      'JWT_PREVIOUS_KEY holds no PEM key',
    ]);
    assert.deepEqual(problems({ JWT_KEY: pem(), JWT_PREVIOUS_KEY: ec }), [
      'JWT_PREVIOUS_KEY holds a ec prime256v1 key, which cannot sign RS256',
    ]);
    assert.match(
      problems({ JWT_ALGORITHM: 'HS256', JWT_KEY: 'k'.repeat(32), JWT_PREVIOUS_KEY: pem() })[0] ?? '',
      /^JWT_PREVIOUS_KEY needs an asymmetric JWT_ALGORITHM/,
    );
    assert.throws(
      () => loadConfig({ JWT_KEY_ROTATED_AT: 'yesterday' }),
      (err: ConfigError) => {
        assert.deepEqual(err.problems, [
          'JWT_KEY_ROTATED_AT must be an ISO 8601 instant with its zone, such as 2025-01-31T12:00:00Z, got "yesterday"',
        ]);
        return true;
      },
    );
  });

  it('`gatehouse keys rotate` on file keys: tokens verify across the rotation and the first start records it', async () => {
    const dataDir = tempDir('gatehouse-rotate-');
    dirs.push(dataDir);
    const clock = new TestClock(T0.getTime());
    const first = await app({ DATA_DIR: dataDir }, clock);
    const oldKid = first.ctx.keys.kid;
    const oldToken = await accessToken(first, ALICE);

    const cli = io(dataDir, clock);
    assert.equal(await runCli(['keys', 'rotate'], cli), 0, cli.errText());
    const keysDir = path.join(dataDir, 'keys');
    assert.equal(statSync(path.join(keysDir, 'jwt-rs256.pem')).mode & 0o777, 0o600);
    assert.equal(statSync(path.join(keysDir, 'jwt-rs256.previous.pem')).mode & 0o777, 0o600);
    assert.match(cli.outText(), /Restart every instance/);
    assert.equal(await runCli(['keys', 'rotate'], cli), 1, 'not again before an instance loaded it');
    assert.match(cli.errText(), /has not been loaded by any instance yet/);

    clock.advance(60_000);
    const restarted = await app({ DATA_DIR: dataDir }, clock);
    const rotatedAt = readFileSync(path.join(keysDir, 'jwt-rs256.rotated-at'), 'utf8').trim();
    assert.equal(rotatedAt, clock.now().toISOString(), 'the first start after the rotation records its time');
    assert.notEqual(restarted.ctx.keys.kid, oldKid);
    assert.deepEqual((await jwksOf(restarted)).kids, [oldKid, restarted.ctx.keys.kid]);
    assert.equal(
      (await asAlice(restarted, oldToken)).statusCode,
      200,
      'a token from before the rotation works',
    );
    clock.advance(300_000);
    const fresh = await accessToken(restarted, ALICE);
    assert.equal(decodeProtectedHeader(fresh).kid, restarted.ctx.keys.kid);
    assert.equal((await asAlice(restarted, fresh)).statusCode, 200);

    const listing = io(dataDir, clock);
    assert.equal(await runCli(['keys', 'list'], listing), 0);
    assert.match(listing.outText(), new RegExp(`signs +${restarted.ctx.keys.kid} \\(current\\)`));
    assert.match(listing.outText(), new RegExp(`verifies +${oldKid} \\(retired\\)`));
    assert.equal(await runCli(['keys', 'rotate'], listing), 1, 'the old key is still accepted');
    assert.match(listing.errText(), /still accepts its old key until/);
  });

  it('a token forged with the retired (leaked) key stops working when the rotation ends, though this process accepted it before', async () => {
    const dataDir = tempDir('gatehouse-rotate-leak-');
    dirs.push(dataDir);
    const clock = new TestClock(T0.getTime());
    const first = await app({ DATA_DIR: dataDir }, clock);
    // The reason for the rotation: someone else holds the old private key.
    const leaked = first.ctx.keys.signCryptoKey;
    const oldKid = first.ctx.keys.kid as string;
    const cli = io(dataDir, clock);
    assert.equal(await runCli(['keys', 'rotate'], cli), 0, cli.errText());
    const t = await app({ DATA_DIR: dataDir, JWKS_MAX_AGE: 300, JWT_EXPIRES_IN: 15 }, clock);
    const end = t.ctx.keys.previousUntil?.getTime() as number;
    assert.equal(end, T0.getTime() + 300_000 + 15 * 60_000);

    // A minute before the end the old key is still live: a token of it, as short-lived as ours, works.
    clock.set(new Date(end - 60_000));
    const forged = await forge(leaked, oldKid, clock.now(), 15 * 60);
    assert.equal(
      (await asAlice(t, forged)).statusCode,
      200,
      'accepted (and remembered) while the old key is live',
    );
    assert.equal((await asAlice(t, forged)).statusCode, 200);

    clock.set(new Date(end));
    const after = await asAlice(t, forged);
    assert.equal(after.statusCode, 401, 'refused once the rotation has ended, 14 minutes before its exp');
    assert.match(after.json().message, /signed with a key this service does not accept/);
    assert.deepEqual((await jwksOf(t)).kids, [t.ctx.keys.kid]);
    assert.equal((await asAlice(t, await accessToken(t, ALICE))).statusCode, 200, 'the current key works');
  });

  it('a token signed with the live key that lives longer than JWT_EXPIRES_IN (10 years) is refused', async () => {
    const t = await app({ JWT_KEY: pem(), JWT_EXPIRES_IN: 15 });
    const kid = t.ctx.keys.kid as string;
    const tenYears = await forge(t.ctx.keys.signCryptoKey, kid, T0, 10 * 365 * 86400);
    const res = await asAlice(t, tenYears);
    assert.equal(res.statusCode, 401);
    assert.match(res.json().message, /lives longer .* than this service's tokens \(JWT_EXPIRES_IN: 900 s\)/);
    const noIat = await forge(t.ctx.keys.signCryptoKey, kid, T0, 600, { iat: false });
    assert.match((await asAlice(t, noIat)).json().message, /no issue time \(iat\)/);
    const ahead = await forge(t.ctx.keys.signCryptoKey, kid, new Date(T0.getTime() + 3600_000), 600);
    assert.match((await asAlice(t, ahead)).json().message, /issued in the future/);
    assert.equal((await asAlice(t, await forge(t.ctx.keys.signCryptoKey, kid, T0, 15 * 60))).statusCode, 200);
  });

  it('`gatehouse keys rotate` with JWT_KEY in the environment writes the new key to --out and tells what to deploy', async () => {
    const dir = tempDir('gatehouse-rotate-env-');
    dirs.push(dir);
    const clock = new TestClock(T0.getTime());
    const cli = io(dir, clock, { JWT_KEY: pem() });
    assert.equal(await runCli(['keys', 'rotate'], cli), 2, 'the new key is not printed');
    assert.match(cli.errText(), /give --out FILE/);
    assert.equal(await runCli(['keys', 'rotate', '--out', 'next.pem'], cli), 0, cli.errText());
    const file = path.join(dir, 'next.pem');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(readFileSync(file, 'utf8'), /^-----BEGIN PRIVATE KEY-----/);
    assert.match(cli.outText(), /JWT_PREVIOUS_KEY=<the current JWT_KEY>/);
    assert.match(cli.outText(), /JWT_KEY_ROTATED_AT=/);
    assert.doesNotMatch(cli.outText(), /BEGIN PRIVATE KEY/, 'no key in the output');

    const hs = io(dir, clock, { JWT_ALGORITHM: 'HS256', JWT_KEY: 'k'.repeat(32) });
    assert.equal(await runCli(['keys', 'rotate'], hs), 1);
    assert.match(hs.errText(), /a shared secret has no public half/);
    assert.ok(!existsSync(path.join(dir, 'keys')), 'nothing written');
  });
});

/** A token for ALICE signed with `key`, issued at `iat`, living `lifetimeS` seconds. */
function forge(key: CryptoKey, kid: string, iat: Date, lifetimeS: number, opts: { iat?: boolean } = {}) {
  const now = Math.floor(iat.getTime() / 1000);
  const jwt = new SignJWT({
    'https://hasura.io/jwt/claims': {
      'x-hasura-user-id': ALICE,
      'x-hasura-allowed-roles': ['user'],
      'x-hasura-default-role': 'user',
    },
  })
    .setProtectedHeader({ alg: 'RS256', kid })
    .setIssuer('nhost')
    .setExpirationTime(now + lifetimeS);
  return (opts.iat === false ? jwt : jwt.setIssuedAt(now)).sign(key);
}

/** CLI input and output in memory, with the settings of a test. */
function io(cwd: string, clock: TestClock, env: Record<string, string> = {}) {
  let out = '';
  let err = '';
  const cli: CliIO & { outText(): string; errText(): string } = {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: { DATA_DIR: cwd, CUSTOM_DIR: path.join(cwd, 'custom'), ...env },
    cwd,
    input: () => '',
    now: () => clock.now(),
    outText: () => out,
    errText: () => err,
  };
  return cli;
}
