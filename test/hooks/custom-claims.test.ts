/**
 * Custom claims (JWT_CLAIMS_FUNCTION, JWT_CLAIMS_HOOK_URL): the app's keys reach the Hasura claims on
 * sign-in and refresh, and a hook that fails, times out, answers badly or tries to set a claim only the
 * service sets refuses the token (503 CLAIMS_HOOK_FAILED) with no session left behind. The URL hook is a
 * real HTTP server that verifies every request with the `standardwebhooks` package.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ConfigError } from '../../src/config.ts';
import { login } from '../auth/helpers.ts';
import { createAccount, HS, newEmail } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { captureLog } from '../helpers/log.ts';

const NAMESPACE = 'https://hasura.io/jwt/claims';
const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1] as string, 'base64url').toString())[NAMESPACE];
const SECRET = `whsec_${Buffer.from('a-test-secret-of-thirty-two-bytes!!').toString('base64')}`;
const PASSWORD = 'correct horse battery';

async function sessionsOf(t: TestApp, accountId: string): Promise<number> {
  const { rows } = await t.ctx.db.query<{ n: number }>(
    'test-sessions',
    'SELECT count(*)::int AS n FROM auth.sessions WHERE account_id = $1',
    [accountId],
  );
  return Number(rows[0]?.n);
}

async function account(t: TestApp) {
  const email = newEmail('claims');
  const ids = await createAccount(t, { email, password: PASSWORD });
  return { email, ...ids };
}

const refresh = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

function assertRefused(res: { statusCode: number; body: string }) {
  assert.equal(res.statusCode, 503, res.body);
  const body = JSON.parse(res.body);
  assert.equal(body.code, 'CLAIMS_HOOK_FAILED');
  // The answer says nothing of the app's hook beyond the code.
  assert.doesNotMatch(body.message, /function|org|reserved|HTTP/);
}

for (const kind of dbKinds()) {
  describe(`JWT_CLAIMS_FUNCTION [${kind}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        STORAGE_ENABLED: false,
        JWT_CLAIMS_FUNCTION: 'public.app_claims',
      });
      await t.ctx.db.exec(`
        CREATE TABLE public.memberships (user_id uuid PRIMARY KEY, org_id text NOT NULL);
        CREATE TABLE public.claims_mode (mode text NOT NULL);
        INSERT INTO public.claims_mode VALUES ('ok');
        CREATE FUNCTION public.app_claims(user_id uuid, claims jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
        DECLARE m text;
        BEGIN
          SELECT mode INTO m FROM public.claims_mode;
          IF m = 'reserved' THEN RETURN jsonb_build_object('x-hasura-user-id', gen_random_uuid()); END IF;
          IF m = 'raise' THEN RAISE EXCEPTION 'no membership'; END IF;
          IF m = 'array' THEN RETURN '[1,2]'::jsonb; END IF;
          RETURN jsonb_build_object(
            'x-hasura-org-id', (SELECT org_id FROM public.memberships WHERE memberships.user_id = app_claims.user_id),
            'x-hasura-seen-role', claims->>'x-hasura-default-role',
            'teams', jsonb_build_array('red', 'blue'));
        END $$;`);
    });
    after(() => t.close());
    const setMode = (mode: string) =>
      t.ctx.db.query('test-mode', 'UPDATE public.claims_mode SET mode = $1', [mode]);

    it("adds the function's keys to the claims of sign-in and refresh tokens", async () => {
      await setMode('ok');
      const a = await account(t);
      await t.ctx.db.query('test-member', 'INSERT INTO public.memberships VALUES ($1, $2)', [
        a.userId,
        'org-7',
      ]);
      const res = await login(t, { email: a.email, password: PASSWORD, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const claims = claimsOf(res.json().jwt_token);
      assert.equal(claims['x-hasura-org-id'], 'org-7');
      // The function is handed the service's claims.
      assert.equal(claims['x-hasura-seen-role'], 'user');
      assert.equal(claims['x-hasura-teams'], '{"red","blue"}');
      assert.equal(claims['x-hasura-user-id'], a.userId);
      await t.ctx.db.query('test-member', 'UPDATE public.memberships SET org_id = $2 WHERE user_id = $1', [
        a.userId,
        'org-8',
      ]);
      const r = await refresh(t, res.json().refresh_token);
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(claimsOf(r.json().jwt_token)['x-hasura-org-id'], 'org-8');
    });

    for (const [mode, what] of [
      ['reserved', 'a reserved key (x-hasura-user-id)'],
      ['raise', 'an exception'],
      ['array', 'an answer that is not an object'],
    ] as const) {
      it(`answers 503 CLAIMS_HOOK_FAILED and stores no session for ${what}`, async () => {
        const a = await account(t);
        await setMode(mode);
        assertRefused(await login(t, { email: a.email, password: PASSWORD, cookie: false }));
        assert.equal(await sessionsOf(t, a.accountId), 0);
      });
    }

    it('refuses a refresh while the function fails, and leaves the refresh token usable', async () => {
      await setMode('ok');
      const a = await account(t);
      const res = await login(t, { email: a.email, password: PASSWORD, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      await setMode('raise');
      assertRefused(await refresh(t, res.json().refresh_token));
      await setMode('ok');
      const r = await refresh(t, res.json().refresh_token);
      assert.equal(r.statusCode, 200, r.body);
    });
  });

  describe(`JWT_CLAIMS_HOOK_URL [${kind}]`, () => {
    let t: TestApp;
    let server: Server;
    let mode = 'ok';
    const logged = captureLog();
    const received: { body: Record<string, unknown>; headers: Record<string, string> }[] = [];
    before(async () => {
      const verifier = new Webhook(SECRET);
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          const headers = req.headers as Record<string, string>;
          let body: Record<string, unknown>;
          try {
            body = verifier.verify(raw, headers) as Record<string, unknown>;
          } catch {
            res.writeHead(401).end();
            return;
          }
          received.push({ body, headers });
          const answer = (status: number, text: string) =>
            res.writeHead(status, { 'content-type': 'application/json' }).end(text);
          if (mode === 'slow') setTimeout(() => answer(200, '{"claims":{}}'), 1500);
          else if (mode === 'error') answer(500, '{}');
          else if (mode === 'not-json') answer(200, '<html>');
          else if (mode === 'no-claims') answer(200, '{"org":"x"}');
          else if (mode === 'reserved') answer(200, '{"claims":{"x-hasura-allowed-roles":["admin"]}}');
          else if (mode === 'sub') answer(200, '{"claims":{"sub":"someone"}}');
          else {
            const user = body.user as { id: string };
            answer(200, JSON.stringify({ claims: { 'x-hasura-org-id': `org-of-${user.id}`, tier: 3 } }));
          }
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      t = await buildTestApp(
        kind,
        {
          ...HS,
          RATE_LIMIT_ENABLED: false,
          STORAGE_ENABLED: false,
          JWT_CLAIMS_HOOK_URL: `http://127.0.0.1:${port}/claims`,
          JWT_CLAIMS_HOOK_SECRET: SECRET,
          JWT_CLAIMS_HOOK_TIMEOUT_MS: 300,
        },
        { log: logged.log },
      );
    });
    after(async () => {
      await t.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it("sends a signed request and adds the answer's claims, on sign-in and refresh", async () => {
      mode = 'ok';
      received.length = 0;
      const a = await account(t);
      const res = await login(t, { email: a.email, password: PASSWORD, cookie: false });
      assert.equal(res.statusCode, 200, res.body);
      const claims = claimsOf(res.json().jwt_token);
      assert.equal(claims['x-hasura-org-id'], `org-of-${a.userId}`);
      assert.equal(claims['x-hasura-tier'], '3');
      assert.equal(received.length, 1);
      const first = received[0] as (typeof received)[number];
      assert.match(first.headers['webhook-id'] as string, /^msg_/);
      assert.match(first.headers['webhook-signature'] as string, /^v1,/);
      assert.deepEqual(first.body.user, {
        id: a.userId,
        email: a.email,
        roles: ['user'],
        default_role: 'user',
      });
      const session = first.body.session as { id: string; method: string };
      assert.equal(session.method, 'password');
      assert.equal(
        session.id,
        JSON.parse(Buffer.from(res.json().jwt_token.split('.')[1], 'base64url').toString()).sid,
      );
      assert.equal((first.body.claims as Record<string, string>)['x-hasura-user-id'], a.userId);
      const r = await refresh(t, res.json().refresh_token);
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(claimsOf(r.json().jwt_token)['x-hasura-org-id'], `org-of-${a.userId}`);
      assert.equal(received.length, 2);
      assert.deepEqual(received[1]?.body.session, session);
    });

    for (const [m, what] of [
      ['slow', 'a hook slower than JWT_CLAIMS_HOOK_TIMEOUT_MS'],
      ['error', 'a hook answering 500'],
      ['not-json', 'a hook answering something that is not JSON'],
      ['no-claims', 'a hook answering without "claims"'],
      ['reserved', 'a hook setting x-hasura-allowed-roles'],
      ['sub', 'a hook setting sub'],
    ] as const) {
      it(`answers 503 CLAIMS_HOOK_FAILED and stores no session for ${what}`, async () => {
        mode = m;
        const a = await account(t);
        const before = logged.lines.length;
        assertRefused(await login(t, { email: a.email, password: PASSWORD, cookie: false }));
        assert.equal(await sessionsOf(t, a.accountId), 0);
        // Logged with the reason, never with the secret.
        const lines = JSON.stringify(logged.lines.slice(before));
        assert.match(lines, /custom claims refused: /);
        assert.ok(!logged.text().includes(SECRET.slice(6)), 'the secret was logged');
      });
    }

    it('answers 503 when the hook cannot be reached', async () => {
      const { port } = server.address() as AddressInfo;
      const down = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        STORAGE_ENABLED: false,
        // A port nothing listens on: the one of a server just closed.
        JWT_CLAIMS_HOOK_URL: `http://127.0.0.1:${await closedPort()}/claims`,
        JWT_CLAIMS_HOOK_SECRET: SECRET,
      });
      try {
        assert.ok(port > 0);
        const a = await account(down);
        assertRefused(await login(down, { email: a.email, password: PASSWORD, cookie: false }));
        assert.equal(await sessionsOf(down, a.accountId), 0);
      } finally {
        await down.close();
      }
    });
  });
}

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

describe('custom-claims settings', () => {
  it('warns at start when JWT_CLAIMS_FUNCTION does not exist yet', async () => {
    const logged = captureLog('warn');
    const t = await buildTestApp(
      'pglite',
      { ...HS, JWT_CLAIMS_FUNCTION: 'public.not_there' },
      { log: logged.log },
    );
    try {
      assert.equal(
        logged.matching(
          /JWT_CLAIMS_FUNCTION public\.not_there\(user_id uuid, claims jsonb\) does not exist yet/,
        ).length,
        1,
      );
    } finally {
      await t.close();
    }
  });

  for (const [overrides, expected] of [
    [{ JWT_CLAIMS_FUNCTION: 'jwt_claims' }, /JWT_CLAIMS_FUNCTION must be a schema-qualified function name/],
    [{ JWT_CLAIMS_FUNCTION: 'public.x; DROP TABLE y' }, /JWT_CLAIMS_FUNCTION must be a schema-qualified/],
    [
      { JWT_CLAIMS_HOOK_URL: 'ftp://example.com/x', JWT_CLAIMS_HOOK_SECRET: SECRET },
      /JWT_CLAIMS_HOOK_URL must be an http/,
    ],
    [
      { JWT_CLAIMS_HOOK_URL: 'https://example.com/x' },
      /JWT_CLAIMS_HOOK_SECRET must be a Standard Webhooks secret/,
    ],
    [
      { JWT_CLAIMS_HOOK_URL: 'https://example.com/x', JWT_CLAIMS_HOOK_SECRET: 'short' },
      /JWT_CLAIMS_HOOK_SECRET must be/,
    ],
  ] as const) {
    it(`refuses to start with ${JSON.stringify(overrides)}`, async () => {
      await assert.rejects(buildTestApp('pglite', { ...HS, ...overrides }), (err: Error) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.ok(
          err.problems.some((p) => expected.test(p)),
          err.problems.join('\n'),
        );
        // The secret is never part of a message.
        assert.ok(!err.problems.some((p) => p.includes(SECRET)));
        return true;
      });
    });
  }
});
