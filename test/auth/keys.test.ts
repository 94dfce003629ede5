import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { loadJwtKeys } from '../../src/auth/keys.ts';
import { ConfigError, configFrom, type JwtAlgorithm } from '../../src/config.ts';
import { buildTestApp, tempDir } from '../helpers/app.ts';
import { signUp } from './helpers.ts';

describe('signing keys', () => {
  it('generates a key once into DATA_DIR outside production and reuses it', async () => {
    const dir = tempDir();
    const config = configFrom({
      DATA_DIR: dir,
      CUSTOM_DIR: path.join(dir, 'custom'),
      JWT_ALGORITHM: 'RS256',
    });
    const a = await loadJwtKeys(config);
    const b = await loadJwtKeys(config);
    assert.equal(a.kid, b.kid);
    assert.match(a.source, /generated/);
  });

  it('refuses to start in production without a key, among the configuration problems', () => {
    const dir = tempDir();
    assert.throws(
      () =>
        configFrom({
          DATA_DIR: dir,
          CUSTOM_DIR: path.join(dir, 'custom'),
          NODE_ENV: 'production',
          DATABASE_URL: 'postgres://localhost/x',
          COOKIE_SECRET: 'c'.repeat(32),
          MFA_ENCRYPTION_KEY: 'm'.repeat(32),
        }),
      (err) => err instanceof ConfigError && /JWT_KEY \(a PEM private key\) or the file/.test(err.message),
    );
  });

  it("reads HBP's custom/keys/private.pem", async () => {
    const dir = tempDir();
    const custom = path.join(dir, 'custom');
    mkdirSync(path.join(custom, 'keys'), { recursive: true });
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(
      path.join(custom, 'keys', 'private.pem'),
      privateKey.export({ format: 'pem', type: 'pkcs8' }),
    );
    const keys = await loadJwtKeys(configFrom({ DATA_DIR: dir, CUSTOM_DIR: custom, JWT_ALGORITHM: 'RS256' }));
    assert.match(keys.source, /private\.pem$/);
  });

  for (const alg of ['RS384', 'ES256', 'EdDSA'] as JwtAlgorithm[]) {
    it(`issues ${alg} tokens that verify through /auth/jwks`, async () => {
      const t = await buildTestApp('pglite', { JWT_ALGORITHM: alg, RATE_LIMIT_ENABLED: false });
      try {
        const s = await signUp(t);
        const jwks = (await t.app.inject({ method: 'GET', url: '/auth/jwks' })).json();
        const { payload, protectedHeader } = await jwtVerify(s.jwt, createLocalJWKSet(jwks), {
          algorithms: [alg],
          currentDate: t.clock.now(),
        });
        assert.equal(protectedHeader.alg, alg);
        assert.equal(payload.sub, s.userId);
      } finally {
        await t.close();
      }
    });
  }
});
