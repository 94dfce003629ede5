/**
 * The OAuth authorization server: the code → token exchange (each request spends one authorization code,
 * made beforehand through the authorize route with consent already given) and token introspection by a
 * confidential client, next to the authenticated storage metadata read of the same run (the issue's goal:
 * introspection at least 0.5x of it).
 */
import { createHash, randomBytes } from 'node:crypto';
import { generatePrivateKeyPem } from '../../src/auth/keys.ts';
import type { BenchEnv, Scenario } from '../lib/env.ts';
import { serviceDatabase } from '../lib/env.ts';
import { runLoad } from '../lib/load.ts';
import { type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';
import { BENCH_USER, benchToken, HS_ENV } from '../lib/tokens.ts';

const RESOURCE = 'https://mcp.example.com/mcp';
const REDIRECT = 'http://127.0.0.1:8976/callback';

async function json<T>(res: Response): Promise<T> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

export const oauthScenarios: Scenario = {
  name: 'oauth',
  async run(env: BenchEnv): Promise<Row[]> {
    const database = await serviceDatabase(env);
    const svc = await startService({
      ...database.vars,
      ...HS_ENV,
      OAUTH_SERVER_ENABLED: 'true',
      // HS256 access tokens for the storage baseline; the authorization server signs with its own key.
      OAUTH_SERVER_KEY: generatePrivateKeyPem('ES256'),
      OAUTH_SERVER_ALGORITHM: 'ES256',
      OAUTH_DYNAMIC_REGISTRATION: 'true',
      OAUTH_RESOURCES: RESOURCE,
      ARGON2_MEMORY_COST: '1024',
      ARGON2_TIME_COST: '1',
    });
    try {
      const creds = { email: 'oauth-bench@example.com', password: 'correct horse battery staple' };
      await json(await post(`${svc.url}/auth/register`, { ...creds, cookie: false }));
      const login = await post(`${svc.url}/auth/login`, { ...creds, cookie: true });
      await json(login);
      const cookie = login.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
      const publicClient = await json<{ client_id: string }>(
        await post(`${svc.url}/auth/oauth2/register`, {
          client_name: 'bench agent',
          redirect_uris: [REDIRECT],
          token_endpoint_auth_method: 'none',
        }),
      );
      const rs = await json<{ client_id: string; client_secret: string }>(
        await post(`${svc.url}/auth/oauth2/register`, {
          client_name: 'bench resource server',
          redirect_uris: [REDIRECT],
        }),
      );
      const verifier = randomBytes(32).toString('base64url');
      const challenge = createHash('sha256').update(verifier).digest('base64url');
      const authorizeUrl = `${svc.url}/auth/oauth2/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: publicClient.client_id,
        redirect_uri: REDIRECT,
        scope: 'openid',
        resource: RESOURCE,
        code_challenge: challenge,
        code_challenge_method: 'S256',
      })}`;
      // Consent once (the form posted as a browser does); later requests come straight back with a code.
      const page = await fetch(authorizeUrl, { headers: { cookie } });
      const fields = [
        ...(await page.text()).matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g),
      ].map((m) => [m[1] as string, (m[2] as string).replace(/&amp;/g, '&')] as [string, string]);
      const consented = await fetch(`${svc.url}/auth/oauth2/authorize`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: svc.url },
        body: new URLSearchParams([...fields, ['decision', 'allow']]).toString(),
        redirect: 'manual',
      });
      if (consented.status !== 303) throw new Error(`consent answered ${consented.status}`);
      const codeBody = (code: string) =>
        new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
          client_id: publicClient.client_id,
        }).toString();
      const count = env.quick ? 1500 : 4000;
      env.log(`making ${count} authorization codes`);
      const codes: string[] = [];
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (codes.length < count) {
            const res = await fetch(authorizeUrl, { headers: { cookie }, redirect: 'manual' });
            const code = new URL(res.headers.get('location') ?? 'x:/').searchParams.get('code');
            if (!code) throw new Error(`authorize answered ${res.status} without a code`);
            codes.push(code);
          }
        }),
      );
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      env.log('code → token exchange');
      const exchange = await runLoad({
        url: `${svc.url}/auth/oauth2/token`,
        method: 'POST',
        headers: form,
        connections: 16,
        durationS: 50,
        amount: codes.length,
        bodies: codes.map(codeBody),
      });
      if (exchange.non2xx > 0 || exchange.errors > 0)
        throw new Error(
          `exchange load: ${exchange.non2xx} non-2xx, ${exchange.errors} errors; first: ${exchange.firstFailure ?? 'none'}`,
        );

      // A live access token to introspect.
      const fresh = await fetch(authorizeUrl, { headers: { cookie }, redirect: 'manual' });
      const code = new URL(fresh.headers.get('location') as string).searchParams.get('code') as string;
      const tokens = await json<{ access_token: string }>(
        await fetch(`${svc.url}/auth/oauth2/token`, { method: 'POST', headers: form, body: codeBody(code) }),
      );
      const basic = `Basic ${Buffer.from(`${rs.client_id}:${rs.client_secret}`).toString('base64')}`;
      env.log('introspection');
      const introspection = await runLoad({
        url: `${svc.url}/auth/oauth2/introspect`,
        method: 'POST',
        headers: { ...form, authorization: basic },
        body: new URLSearchParams({ token: tokens.access_token }).toString(),
        connections: 16,
        durationS: env.durationS,
      });
      if (introspection.non2xx > 0 || introspection.errors > 0)
        throw new Error(
          `introspection load: ${introspection.non2xx} non-2xx, ${introspection.errors} errors`,
        );

      // The same run's authenticated metadata read (as the storage scenario measures it).
      const auth = { authorization: `Bearer ${await benchToken()}` };
      const fd = new FormData();
      fd.append('file', new Blob(['hello world'], { type: 'text/plain' }), 'small.txt');
      const up = await fetch(`${svc.url}/storage/o/user/${BENCH_USER}/small.txt`, {
        method: 'POST',
        headers: auth,
        body: fd,
      });
      if (!up.ok) throw new Error(`upload answered ${up.status}: ${await up.text()}`);
      env.log('metadata reads (baseline)');
      const meta = await runLoad({
        url: `${svc.url}/storage/m/user/${BENCH_USER}/small.txt`,
        headers: auth,
        connections: 16,
        durationS: env.durationS,
      });
      if (meta.non2xx > 0 || meta.errors > 0) throw new Error(`metadata load: ${meta.non2xx} non-2xx`);
      return [
        row(
          'POST /auth/oauth2/token (code → tokens, ES256)',
          'req/s',
          exchange.requestsPerSec,
          meta.requestsPerSec,
          { kind: 'none', value: 0 },
          {
            codes: exchange.requests,
            p99ms: exchange.latencyP99,
            baseline: 'GET /storage/m',
          },
        ),
        row(
          'POST /auth/oauth2/introspect (ES256 JWT)',
          'req/s',
          introspection.requestsPerSec,
          meta.requestsPerSec,
          { kind: 'min-ratio', value: 0.5 },
          {
            p99ms: introspection.latencyP99,
            baseline: 'GET /storage/m',
          },
        ),
      ];
    } finally {
      await svc.stop();
      await database.drop();
    }
  },
};
