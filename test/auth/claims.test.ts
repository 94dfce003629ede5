/**
 * Claims that neither configuration nor input can forge. A JWT custom field is a `public.users` column,
 * and with REGISTRATION_CUSTOM_FIELDS one the registering user writes: named `user_id`, it became
 * `x-hasura-user-id` and was written after the real one, so a new user could mint a token naming
 * another user. The start now refuses such a field, and the claims builder writes the reserved claims
 * last anyway. A token signed with the right key must still carry a UUID user id and an expiry.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { buildApp } from '../../src/app.ts';
import { type Config, ConfigError, configFrom } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { migrate } from '../../src/db/migrate.ts';
import { buildTestApp, type TestApp, tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds, type TestDatabase } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { bearer, count, HS, newEmail, signUp } from './helpers.ts';

const NAMESPACE = 'https://hasura.io/jwt/claims';
const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1] as string, 'base64url').toString())[NAMESPACE];

for (const kind of dbKinds()) {
  describe(`a custom field named user_id [${kind}]`, () => {
    it('stops the start, naming the field', async () => {
      await assert.rejects(
        buildTestApp(kind, {
          ...HS,
          REGISTRATION_CUSTOM_FIELDS: ['user_id'],
          JWT_CUSTOM_FIELDS: ['user_id'],
        }),
        (err: Error) => {
          assert.ok(err instanceof ConfigError, String(err));
          assert.deepEqual(err.problems, [
            'JWT_CUSTOM_FIELDS entry "user_id" would become the claim x-hasura-user-id, which only the service sets; remove it or use another column',
          ]);
          return true;
        },
      );
    });

    describe('when a configuration slips past the check', () => {
      // The app built by hand, with the setting the check refuses, on a database that has the column:
      // the claims builder alone must keep the token the caller's.
      let app: Awaited<ReturnType<typeof buildApp>>;
      let database: TestDatabase;
      let ctx: Awaited<ReturnType<typeof createContext>>;
      const dir = tempDir();
      before(async () => {
        const valid = configFrom({
          ...HS,
          DATA_DIR: dir,
          CUSTOM_DIR: path.join(dir, 'custom'),
          LOG_LEVEL: 'silent',
          ARGON2_MEMORY_COST: 1024,
          ARGON2_TIME_COST: 1,
          RATE_LIMIT_ENABLED: false,
          STORAGE_ENABLED: false,
        });
        const config: Config = Object.freeze({
          ...valid,
          REGISTRATION_CUSTOM_FIELDS: ['user_id'],
          JWT_CUSTOM_FIELDS: ['user_id'],
        });
        database = await createTestDatabase(kind);
        const log = (await import('pino')).default({ level: 'silent' });
        // The column exists before the start-up check of createContext looks for it.
        await migrate(database.db);
        await database.db.exec('ALTER TABLE public.users ADD COLUMN user_id text');
        ctx = await createContext(config, { log, db: database.db });
        app = await buildApp(ctx, { logger: false });
      });
      after(async () => {
        await app.close();
        await closeContext(ctx);
        await database.drop();
        rmSync(dir, { recursive: true, force: true });
      });

      it("a new user who registers with user_id set to another user's id gets a token with their own id", async () => {
        const victim = (
          await app.inject({
            method: 'POST',
            url: '/auth/register',
            payload: { email: newEmail('victim'), password: 'victim password', cookie: false },
          })
        ).json();
        const res = await app.inject({
          method: 'POST',
          url: '/auth/register',
          payload: {
            email: newEmail('attacker'),
            password: 'attacker password',
            cookie: false,
            user_data: { user_id: victim.user.id },
          },
        });
        assert.equal(res.statusCode, 200, res.body);
        const body = res.json();
        assert.notEqual(body.user.id, victim.user.id);
        const claims = claimsOf(body.jwt_token);
        assert.equal(claims['x-hasura-user-id'], body.user.id);
        // And acting with it touches the attacker's sessions, not the victim's.
        const revoke = await app.inject({
          method: 'POST',
          url: '/auth/token/revoke',
          headers: bearer(body.jwt_token),
        });
        assert.equal(revoke.statusCode, 204);
        const refreshed = await app.inject({
          method: 'GET',
          url: `/auth/token/refresh?refresh_token=${encodeURIComponent(victim.refresh_token)}`,
        });
        assert.equal(refreshed.statusCode, 200, 'the victim is still signed in');
      });
    });
  });

  describe(`tokens signed with the right key but malformed [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, ALLOW_USER_SELF_DELETE: true });
    });
    after(() => t.close());

    const sign = (userId: string, exp: boolean) => {
      const now = Math.floor(t.clock.now().getTime() / 1000);
      const jwt = new SignJWT({
        [NAMESPACE]: {
          'x-hasura-user-id': userId,
          'x-hasura-allowed-roles': ['user'],
          'x-hasura-default-role': 'user',
        },
      })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuer(t.config.JWT_ISSUER)
        .setSubject(userId)
        .setIssuedAt(now);
      return (exp ? jwt.setExpirationTime(now + 600) : jwt).sign(new TextEncoder().encode(HS.JWT_KEY));
    };

    const calls = (jwt: string) => {
      const upload = multipartBody([{ name: 'file', filename: 'a.txt', type: 'text/plain', data: 'a' }]);
      const folder = `/storage/o/user/${encodeURIComponent(claimsOf(jwt)['x-hasura-user-id'])}`;
      return {
        'POST /auth/token/revoke': { method: 'POST' as const, url: '/auth/token/revoke' },
        'POST /auth/delete': { method: 'POST' as const, url: '/auth/delete' },
        'POST /auth/mfa/generate': { method: 'POST' as const, url: '/auth/mfa/generate' },
        'GET storage file': { method: 'GET' as const, url: `${folder}/a.txt` },
        'GET storage metadata': {
          method: 'GET' as const,
          url: `/storage/m${folder.slice('/storage/o'.length)}/a.txt`,
        },
        'POST storage upload': {
          method: 'POST' as const,
          url: `${folder}/a.txt`,
          payload: upload.payload,
          headers: upload.headers,
        },
        'DELETE storage file': { method: 'DELETE' as const, url: `${folder}/a.txt` },
      };
    };

    it('answers 401 on auth and storage routes to a user id that is not a UUID', async () => {
      for (const id of ['not-a-uuid', "' OR '1'='1", '00000000-0000-0000-0000-00000000000g']) {
        const jwt = await sign(id, true);
        for (const [what, req] of Object.entries(calls(jwt))) {
          const res = await t.app.inject({
            ...req,
            headers: { ...bearer(jwt), ...('headers' in req ? req.headers : {}) },
          });
          assert.equal(res.statusCode, 401, `${what} with user id ${id}: ${res.body}`);
          assert.equal(res.json().code, 'UNAUTHENTICATED');
        }
      }
    });

    it('answers 401 on auth and storage routes to a token without exp, even for a real account', async () => {
      const s = await signUp(t);
      const jwt = await sign(s.userId, false);
      for (const [what, req] of Object.entries(calls(jwt))) {
        const res = await t.app.inject({
          ...req,
          headers: { ...bearer(jwt), ...('headers' in req ? req.headers : {}) },
        });
        assert.equal(res.statusCode, 401, `${what}: ${res.body}`);
        assert.match(res.json().message, /no expiry/);
      }
      assert.equal(
        await count(t, 'SELECT count(*)::int AS n FROM auth.accounts WHERE user_id = $1', [s.userId]),
        1,
      );
      // The same account with a proper token is served.
      assert.equal(
        (await t.app.inject({ method: 'POST', url: '/auth/token/revoke', headers: bearer(s.jwt) }))
          .statusCode,
        204,
      );
    });
  });
}
