/**
 * AccessTokenVerifier: the request path's memory of verified access tokens must accept and refuse
 * exactly what a full verification accepts and refuses, at every instant.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { type Config, configFrom } from '../config.ts';
import {
  AccessTokenVerifier,
  InvalidAccessToken,
  type PermissionVariables,
  permissionVariables,
  signAccessToken,
  verifyAccessToken,
} from './jwt.ts';
import { type JwtKeys, loadJwtKeys } from './keys.ts';

const T0 = new Date('2026-03-01T12:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const USER_ID = '0b7a3c1e-5d2f-4e8a-9c6b-1f2e3d4c5b6a';
const vars: PermissionVariables = {
  'user-id': USER_ID,
  'allowed-roles': ['user', 'me'],
  'default-role': 'user',
};

async function rejects(p: Promise<unknown>, reason: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.ok(err instanceof InvalidAccessToken, String(err));
    assert.match(err.message, reason);
    return true;
  });
}

describe('AccessTokenVerifier', () => {
  let dir: string;
  let config: Config;
  let keys: JwtKeys;
  /** Signs with the configured key; `claims` replace the standard ones (seconds since T0 for times). */
  const sign = (
    claims: { exp?: number; nbf?: number; iss?: string; iat?: number | null },
    extra: Record<string, unknown> = {},
  ) => {
    let jwt = new SignJWT({
      [config.JWT_CLAIMS_NAMESPACE]: {
        'x-hasura-user-id': USER_ID,
        'x-hasura-allowed-roles': ['user'],
        'x-hasura-default-role': 'user',
      },
      ...extra,
    })
      .setProtectedHeader({ alg: keys.algorithm })
      .setIssuer(claims.iss ?? config.JWT_ISSUER);
    if (claims.iat !== null) jwt = jwt.setIssuedAt(Math.floor(at(claims.iat ?? 0).getTime() / 1000));
    if (claims.exp !== undefined) jwt = jwt.setExpirationTime(Math.floor(at(claims.exp).getTime() / 1000));
    if (claims.nbf !== undefined) jwt = jwt.setNotBefore(Math.floor(at(claims.nbf).getTime() / 1000));
    return jwt.sign(keys.signCryptoKey);
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'gatehouse-jwt-'));
    config = configFrom({ DATA_DIR: dir, JWT_ALGORITHM: 'HS256', JWT_KEY: 'k'.repeat(48) });
    keys = await loadJwtKeys(config);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('answers a token seen before with the same permission variables, frozen', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const { token } = await signAccessToken(keys, config, vars, T0);
    const first = await v.verify(token, at(1));
    assert.deepEqual(first, await verifyAccessToken(keys, config, token, at(1)));
    assert.equal(await v.verify(token, at(2)), first);
    assert.equal(v.size, 1);
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first['allowed-roles']));
  });

  it('refuses a remembered token from the second of its expiry on, as "expired"', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const token = await sign({ exp: 60 });
    await v.verify(token, at(59.999));
    await rejects(v.verify(token, at(60)), /expired/);
    await rejects(verifyAccessToken(keys, config, token, at(60)), /expired/);
    assert.equal(v.size, 0);
  });

  it('refuses a remembered token again when the clock goes back before its nbf', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const token = await sign({ exp: 600, nbf: 10 });
    await rejects(v.verify(token, at(9)), /not valid yet/);
    assert.equal(v.size, 0, 'a failure is not remembered');
    await v.verify(token, at(10));
    assert.equal(v.size, 1);
    await rejects(v.verify(token, at(9)), /not valid yet/);
  });

  it('refuses a correctly signed token without exp (it would never expire)', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const token = await sign({});
    await rejects(v.verify(token, at(1)), /no expiry/);
    await rejects(verifyAccessToken(keys, config, token, at(1)), /no expiry/);
    assert.equal(v.size, 0);
  });

  it('refuses a correctly signed token whose user-id is not a UUID', async () => {
    const v = new AccessTokenVerifier(keys, config);
    for (const id of ['u-1', "1' OR '1'='1", '', `${USER_ID}x`]) {
      const token = await sign(
        { exp: 600 },
        {
          [config.JWT_CLAIMS_NAMESPACE]: {
            'x-hasura-user-id': id,
            'x-hasura-allowed-roles': ['user'],
            'x-hasura-default-role': 'user',
          },
        },
      );
      await rejects(v.verify(token, at(1)), /not a UUID/);
    }
    assert.equal(v.size, 0);
  });

  it('does not let a remembered token vouch for a tampered copy, another issuer or a foreign key', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const token = await sign({ exp: 600 });
    await v.verify(token, at(1));
    const [h, p, s] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    claims[config.JWT_CLAIMS_NAMESPACE]['x-hasura-user-id'] = 'admin';
    const tampered = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
    await rejects(v.verify(tampered, at(1)), /signature does not match/);
    await rejects(
      v.verify(await sign({ exp: 600, iss: 'someone-else' }), at(1)),
      /issued by 'someone-else', not by this service \('nhost'\)/,
    );
    const foreign = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(config.JWT_ISSUER)
      .setExpirationTime(Math.floor(at(600).getTime() / 1000))
      .sign(new TextEncoder().encode('x'.repeat(48)));
    await rejects(v.verify(foreign, at(1)), /signature does not match/);
    await rejects(v.verify(`${h}.${p}.`, at(1)), /signature does not match|malformed/);
    assert.equal(v.size, 1);
  });

  it('refuses claims without the Hasura variables, and does not remember them', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const token = await new SignJWT({ [config.JWT_CLAIMS_NAMESPACE]: { 'x-hasura-user-id': USER_ID } })
      .setProtectedHeader({ alg: keys.algorithm })
      .setIssuer(config.JWT_ISSUER)
      .setIssuedAt(Math.floor(T0.getTime() / 1000))
      .setExpirationTime(Math.floor(at(600).getTime() / 1000))
      .sign(keys.signCryptoKey);
    await rejects(v.verify(token, at(1)), /incomplete/);
    assert.equal(v.size, 0);
  });

  it('refuses a correctly signed token that lives longer than JWT_EXPIRES_IN (plus a minute), or says nothing of its issue', async () => {
    const v = new AccessTokenVerifier(keys, config);
    const lifetime = config.JWT_EXPIRES_IN * 60;
    await v.verify(await sign({ exp: lifetime + 60 }), at(1));
    await rejects(v.verify(await sign({ exp: lifetime + 61 }), at(1)), /lives longer \(exp - iat: 961 s\)/);
    await rejects(v.verify(await sign({ exp: 10 * 365 * 86400 }), at(1)), /lives longer/);
    await rejects(v.verify(await sign({ exp: 600, iat: null }), at(1)), /no issue time \(iat\)/);
    // An iat moved ahead would make a long-lived token look short-lived.
    await rejects(v.verify(await sign({ iat: 3600, exp: 3600 + 600 }), at(1)), /issued in the future/);
    await v.verify(await sign({ iat: 60, exp: 600 }), at(1));
    assert.equal(v.size, 2);
  });

  it('holds at most maxEntries tokens, dropping the oldest', async () => {
    const v = new AccessTokenVerifier(keys, config, 2);
    const tokens = [await sign({ exp: 600 }), await sign({ exp: 601 }), await sign({ exp: 602 })];
    for (const t of tokens) await v.verify(t, at(1));
    assert.equal(v.size, 2);
    // All three still verify: a dropped one simply takes the full path again.
    for (const t of tokens) await v.verify(t, at(1));
  });
});

describe('signAccessToken with HS*', () => {
  for (const alg of ['HS256', 'HS384', 'HS512'] as const) {
    it(`${alg}: the synchronous HMAC writes the token jose writes, byte for byte, and it verifies`, async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'gatehouse-jwt-'));
      try {
        const config = configFrom({ DATA_DIR: dir, JWT_ALGORITHM: alg, JWT_KEY: 'k'.repeat(64) });
        const keys = await loadJwtKeys(config);
        const authTime = at(-30);
        const signed = await signAccessToken(keys, config, vars, T0, { authTime, sessionId: USER_ID });
        const iat = Math.floor(T0.getTime() / 1000);
        const expected = await new SignJWT({
          [config.JWT_CLAIMS_NAMESPACE]: {
            'x-hasura-user-id': USER_ID,
            'x-hasura-allowed-roles': ['user', 'me'],
            'x-hasura-default-role': 'user',
          },
          auth_time: Math.floor(authTime.getTime() / 1000),
          sid: USER_ID,
        })
          .setProtectedHeader({ alg })
          .setSubject(USER_ID)
          .setIssuer(config.JWT_ISSUER)
          .setIssuedAt(iat)
          .setExpirationTime(iat + config.JWT_EXPIRES_IN * 60)
          .sign(keys.signCryptoKey);
        assert.equal(signed.token, expected);
        assert.equal((await verifyAccessToken(keys, config, signed.token, T0))['user-id'], USER_ID);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe('permissionVariables', () => {
  it('writes the reserved claims last: a custom field named user_id cannot name another user', () => {
    // config.ts refuses such a JWT_CUSTOM_FIELDS at start; this is the mechanism's own guarantee.
    const other = 'ffffffff-ffff-4fff-8fff-ffffffffffff';
    const v = permissionVariables(
      {
        userId: USER_ID,
        defaultRole: 'user',
        roles: ['user'],
        customFields: { user_id: other, default_role: 'admin', allowed_roles: ['admin'], company_id: 7 },
      },
      ['user_id', 'default_role', 'allowed_roles', 'company_id'],
    );
    assert.equal(v['user-id'], USER_ID);
    assert.equal(v['default-role'], 'user');
    assert.deepEqual(v['allowed-roles'], ['user']);
    assert.equal(v['company-id'], '7');
    // HBP's key order is kept: reserved claims, then custom fields.
    assert.deepEqual(Object.keys(v), ['user-id', 'allowed-roles', 'default-role', 'company-id']);
  });
});
