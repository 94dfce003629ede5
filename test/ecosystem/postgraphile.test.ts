/**
 * A real consumer of Gatehouse's tokens: PostGraphile 4 serving GraphQL over HTTP on the same PostgreSQL,
 * verifying RS256 access tokens with the public keys of Gatehouse's /auth/jwks (chosen by kid), with a
 * row-level-security policy on public.users. A user sees only their own row, an anonymous caller none,
 * a tampered token is refused, and tokens of both keys work across a key rotation. Also pins what breaks
 * with the default claims namespace (a URL), as docs/hasura.md says.
 */
import assert from 'node:assert/strict';
import { createPublicKey, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { postgraphile } from 'postgraphile';
import { buildApp } from '../../src/app.ts';
import { configFrom } from '../../src/config.ts';
import { type AppContext, createContext } from '../../src/context.ts';
import { buildTestApp, type TestApp, tempDir, testRsaKey } from '../helpers/app.ts';
import { runsHere } from '../helpers/requirements.ts';

/** A 2048-bit RSA private key, a different one on each call (from the suites' pool, see helpers/app.ts). */
const pem = () => testRsaKey();

interface Jwk {
  kid: string;
  kty: string;
  [k: string]: unknown;
}

/**
 * What a verifier does with a JWKS URL: keep the key set for the response's max-age, and fetch it again
 * (at most once a second) when a token names a kid it does not hold. The URL may change during the test
 * (the rotated instance listens elsewhere), which starts a fresh cache as a new verifier would.
 */
function jwksKeyResolver(url: () => string) {
  let keys: Jwk[] = [];
  let from = '';
  let fresh = 0;
  let fetchedAt = 0;
  const load = async () => {
    from = url();
    const res = await fetch(`${from}/auth/jwks`);
    const maxAge = /max-age=(\d+)/.exec(res.headers.get('cache-control') ?? '')?.[1];
    keys = ((await res.json()) as { keys: Jwk[] }).keys;
    fetchedAt = Date.now();
    fresh = fetchedAt + Number(maxAge ?? 0) * 1000;
  };
  const find = (kid: string | undefined) => keys.find((k) => k.kid === kid);
  return (header: { kid?: string }, done: (err: Error | null, key?: string) => void) => {
    void (async () => {
      const stale = Date.now() >= fresh || from !== url();
      if (stale || (!find(header.kid) && Date.now() - fetchedAt > 1000)) await load();
      const jwk = find(header.kid);
      if (!jwk) throw new Error(`no key ${header.kid} in the JWKS`);
      return createPublicKey({ key: jwk, format: 'jwk' }).export({ format: 'pem', type: 'spki' }) as string;
    })().then(
      (key) => done(null, key),
      (err: Error) => done(err),
    );
  };
}

if (runsHere('postgres', 'PostGraphile 4 verifying Gatehouse tokens with row-level security')) {
  describe('PostGraphile 4 verifies Gatehouse RS256 tokens through /auth/jwks, with row-level security', () => {
    const role = `gatehouse_graphql_${randomBytes(4).toString('hex')}`;
    const oldKey = pem();
    let gate: TestApp;
    let gateUrl = '';
    let rotated: { app: FastifyInstance; ctx: AppContext; url: string; dataDir: string } | undefined;
    let graphile: http.Server;
    let graphileUrl = '';
    let pool: pg.Pool;
    let alice: { id: string; jwt: string; email: string };
    let bob: { id: string; jwt: string; email: string };

    const listen = async (app: FastifyInstance) => {
      await app.listen({ port: 0, host: '127.0.0.1' });
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    };

    const register = async (url: string, email: string) => {
      const res = await fetch(`${url}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'correct horse battery', cookie: false }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { jwt_token: string; user: { id: string } };
      return { id: body.user.id, jwt: body.jwt_token, email };
    };

    const login = async (url: string, email: string) => {
      const res = await fetch(`${url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: 'correct horse battery', cookie: false }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as { jwt_token: string }).jwt_token;
    };

    /** The users PostGraphile shows to the bearer of `jwt` (none: anonymous). */
    const users = async (jwt?: string) => {
      const res = await fetch(`${graphileUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(jwt ? { authorization: `Bearer ${jwt}` } : {}) },
        body: JSON.stringify({ query: '{ allUsers(orderBy: ID_ASC) { nodes { id displayName } } }' }),
      });
      const body = (await res.json()) as {
        data?: { allUsers: { nodes: { id: string }[] } | null } | null;
        errors?: { message: string }[];
      };
      return { status: res.status, ids: body.data?.allUsers?.nodes.map((n) => n.id), errors: body.errors };
    };

    before(async () => {
      gate = await buildTestApp('postgres', {
        JWT_ALGORITHM: 'RS256',
        JWT_KEY: oldKey,
        // PostGraphile turns each claim into a setting named after it; a URL is no setting name.
        JWT_CLAIMS_NAMESPACE: 'hasura',
        RATE_LIMIT_ENABLED: false,
      });
      gateUrl = await listen(gate.app);
      const url = gate.database.url as string;
      pool = new pg.Pool({ connectionString: url, max: 4 });
      // PostGraphile connects as the test's superuser (who bypasses row-level security) and switches to a
      // plain role for each request (pgDefaultRole), as a deployment would connect as a non-owner.
      await pool.query(`
        CREATE ROLE ${role} NOLOGIN;
        GRANT USAGE ON SCHEMA public TO ${role};
        GRANT SELECT ON public.users TO ${role};
        ALTER TABLE public.users ENABLE ROW LEVEL SECURITY;
        CREATE POLICY users_own_row ON public.users FOR SELECT TO ${role}
          USING (id = nullif(current_setting('jwt.claims.sub', true), '')::uuid);`);

      alice = await register(gateUrl, `alice-${randomBytes(4).toString('hex')}@example.com`);
      bob = await register(gateUrl, `bob-${randomBytes(4).toString('hex')}@example.com`);

      graphile = http.createServer(
        postgraphile(pool, 'public', {
          // The key by kid from whichever Gatehouse instance answers (the rotated one once it runs).
          jwtSecret: jwksKeyResolver(() => rotated?.url ?? gateUrl) as unknown as string,
          // No audience: Gatehouse sets no `aud`, and PostGraphile would otherwise require `postgraphile`.
          jwtVerifyOptions: { algorithms: ['RS256'], issuer: 'nhost', audience: [] as unknown as string },
          pgDefaultRole: role,
          disableQueryLog: true,
          retryOnInitFail: false,
        }),
      );
      await new Promise<void>((resolve) => graphile.listen(0, '127.0.0.1', resolve));
      graphileUrl = `http://127.0.0.1:${(graphile.address() as AddressInfo).port}`;
    });

    after(async () => {
      await new Promise((resolve) => graphile?.close(resolve));
      if (rotated) {
        // Its database is the first instance's, closed with it.
        await rotated.app.close();
        await rotated.ctx.mailer.close();
        await rotated.ctx.storage?.objects.close();
        rmSync(rotated.dataDir, { recursive: true, force: true });
      }
      await pool?.query(
        `DROP POLICY IF EXISTS users_own_row ON public.users; DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`,
      );
      await pool?.end();
      await gate?.close();
    });

    it('shows each user only their own row, and an anonymous caller none', async () => {
      assert.deepEqual(await users(alice.jwt), { status: 200, ids: [alice.id], errors: undefined });
      assert.deepEqual(await users(bob.jwt), { status: 200, ids: [bob.id], errors: undefined });
      assert.deepEqual((await users()).ids, []);
    });

    it('refuses a tampered token (another user id in the claims, signature kept)', async () => {
      const [h, p, s] = alice.jwt.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
      claims.sub = bob.id;
      claims.hasura['x-hasura-user-id'] = bob.id;
      const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
      const res = await users(forged);
      assert.equal(res.status, 403);
      assert.equal(res.ids, undefined, 'no data at all');
      assert.match(res.errors?.[0]?.message ?? '', /invalid signature/);
    });

    it('refuses a token signed with a key Gatehouse never published', async () => {
      const other = await buildTestApp('pglite', { JWT_KEY: pem(), JWT_CLAIMS_NAMESPACE: 'hasura' });
      try {
        const { signUp } = await import('../auth/helpers.ts');
        const stranger = await signUp(other);
        const res = await users(stranger.jwt);
        assert.equal(res.status, 403);
        assert.match(res.errors?.[0]?.message ?? '', /no key .* in the JWKS/);
      } finally {
        await other.close();
      }
    });

    it('keeps accepting tokens of the old key after a rotation, and accepts those of the new key', async () => {
      // The instance restarted with a new key, the old one retired long enough ago that the new one signs.
      const dataDir = tempDir('gatehouse-graphile-');
      const now = Date.now();
      const config = configFrom({
        DATA_DIR: dataDir,
        CUSTOM_DIR: `${dataDir}/custom`,
        LOG_LEVEL: 'silent',
        JWT_ALGORITHM: 'RS256',
        JWT_KEY: pem(),
        JWT_PREVIOUS_KEY: oldKey,
        JWT_KEY_ROTATED_AT: new Date(now - 301_000).toISOString(),
        JWKS_MAX_AGE: 300,
        JWT_CLAIMS_NAMESPACE: 'hasura',
        RATE_LIMIT_ENABLED: false,
        ARGON2_MEMORY_COST: 1024,
        ARGON2_TIME_COST: 1,
      });
      const ctx = await createContext(config, { log: pino({ level: 'silent' }), db: gate.ctx.db });
      const app = await buildApp(ctx, { logger: false });
      rotated = { app, ctx, url: await listen(app), dataDir };

      const jwks = (await (await fetch(`${rotated.url}/auth/jwks`)).json()) as { keys: Jwk[] };
      assert.equal(jwks.keys.length, 2, 'both keys are published');

      const newToken = await login(rotated.url, alice.email);
      const header = JSON.parse(Buffer.from(newToken.split('.')[0] as string, 'base64url').toString());
      assert.equal(header.kid, ctx.keys.kid, 'signed with the new key');
      assert.notEqual(header.kid, gate.ctx.keys.kid);

      assert.deepEqual((await users(newToken)).ids, [alice.id], 'a token of the new key works');
      assert.deepEqual((await users(bob.jwt)).ids, [bob.id], 'a token of the old key still works');
    });

    it('breaks with the default claims namespace: PostgreSQL refuses a setting named after a URL', async () => {
      const urlNamespace = await buildTestApp('pglite', { JWT_KEY: oldKey, RATE_LIMIT_ENABLED: false });
      try {
        const { signUp } = await import('../auth/helpers.ts');
        const s = await signUp(urlNamespace);
        // PostGraphile logs the failure as a server error (with its stack): kept here, not in the output.
        const logged: unknown[] = [];
        const consoleError = console.error;
        console.error = (...args: unknown[]) => void logged.push(...args);
        let res: Awaited<ReturnType<typeof users>>;
        try {
          res = await users(s.jwt);
        } finally {
          console.error = consoleError;
        }
        assert.equal(res.status, 500, 'every request with such a token fails');
        assert.equal(res.ids, undefined);
        const refusal =
          /invalid configuration parameter name "jwt\.claims\.https:\/\/hasura\.io\/jwt\/claims"/;
        assert.match(res.errors?.[0]?.message ?? '', refusal);
        assert.match(String(logged[0]), refusal);
      } finally {
        await urlNamespace.close();
      }
    });
  });
}
