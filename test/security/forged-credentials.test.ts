/**
 * Every route whose OpenAPI entry declares bearer security refuses forged credentials. The routes are
 * read from GET /openapi.json of apps with every secured route switched on, so a new secured route is
 * attacked without anyone adding it to a list. Each runs on PGlite and PostgreSQL, with an HS256 and an
 * RS256 key:
 * - no token, a malformed Authorization header, and each forged token of test/helpers/security.ts;
 * - a valid token whose account was deleted since (the revoked session).
 * Routes where signing in is optional (storage: the rules decide what an anonymous caller may do) answer
 * 401 to a forged token as well; without a token they answer as to an anonymous caller, who may not
 * touch another user's files. Their access tokens are checked by signature and claims alone (they are
 * stateless, like every route's), so the deleted-account case applies to the signed-in routes only.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { signUp } from '../auth/helpers.ts';
import { HS } from '../helpers/accounts.ts';
import { buildTestApp, type ConfigOverrides, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { FORGERIES, forgedTokens } from '../helpers/security.ts';
import { startSmtp, type TestSmtp } from '../helpers/smtp.ts';

type JsonSchema = {
  type?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
};

interface Operation {
  security?: Record<string, string[]>[];
  /** False on a route this configuration switches off (listed, marked, answering 404). */
  'x-gatehouse-enabled'?: boolean;
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
}

interface SecuredRoute {
  method: string;
  /** The OpenAPI path, `{*}` for a wildcard. */
  path: string;
  /** False when the security list also allows no credential (`{}`). */
  required: boolean;
  body?: JsonSchema;
  /** The configuration whose app serves it. */
  setup: string;
}

/** The smallest value a schema accepts (required properties only), so validation never answers first. */
function example(schema: JsonSchema): unknown {
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  const choice = schema.anyOf ?? schema.oneOf;
  if (choice?.[0]) return example(choice[0]);
  switch (schema.type) {
    case 'object':
      return Object.fromEntries(
        (schema.required ?? []).map((k) => [k, example(schema.properties?.[k] ?? {})]),
      );
    case 'string': {
      if (schema.format === 'email') return `someone-${randomUUID()}@example.com`;
      if (schema.format === 'uuid') return randomUUID();
      const digits = schema.pattern === undefined ? undefined : /^\^\[0-9\]\{(\d+)\}\$$/.exec(schema.pattern);
      if (digits) return '1'.repeat(Number(digits[1]));
      const length = Math.min(Math.max(schema.minLength ?? 1, 16), schema.maxLength ?? 16);
      return 'a'.repeat(length);
    }
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    default:
      return {};
  }
}

/** Between them, these switch on every secured route (a direct and a verified email change exclude each other). */
const SETUPS: Record<string, (smtp: TestSmtp) => ConfigOverrides> = {
  'direct email change': () => ({
    ALLOW_USER_SELF_DELETE: true,
    MFA_ENABLED: true,
    CHANGE_EMAIL_ENABLED: true,
    VERIFY_EMAILS: false,
    STORAGE_ENABLED: true,
    RATE_LIMIT_ENABLED: false,
    // The provider's issuer is never asked: unlink and tokens read only the database.
    OIDC_ENABLED: true,
    OIDC_ISSUER: 'http://127.0.0.1:9/never-contacted',
    OIDC_CLIENT_ID: 'client',
    OIDC_CLIENT_SECRET: 'secret',
    PROVIDER_TOKENS_STORED: true,
  }),
  'verified email change': (smtp) => ({
    CHANGE_EMAIL_ENABLED: true,
    VERIFY_EMAILS: true,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: smtp.port,
    SMTP_SENDER: 'Gatehouse <no-reply@gatehouse.test>',
    RATE_LIMIT_ENABLED: false,
  }),
};

/** The secured routes of each setup's OpenAPI document, each listed once (under the first setup). */
async function securedRoutes(): Promise<SecuredRoute[]> {
  const smtp = await startSmtp();
  const found = new Map<string, SecuredRoute>();
  try {
    for (const [setup, overrides] of Object.entries(SETUPS)) {
      const t = await buildTestApp('pglite', { ...HS, ...overrides(smtp) });
      try {
        const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
          paths: Record<string, Record<string, Operation>>;
        };
        for (const [path, ops] of Object.entries(doc.paths)) {
          for (const [method, op] of Object.entries(ops)) {
            // A route this setup switches off answers 404 to everyone; another setup serves it.
            if (op['x-gatehouse-enabled'] === false) continue;
            if (!op.security?.some((s) => 'bearer' in s)) continue;
            const key = `${method.toUpperCase()} ${path}`;
            if (found.has(key)) continue;
            found.set(key, {
              method: method.toUpperCase(),
              path,
              required: !op.security.some((s) => Object.keys(s).length === 0),
              body: op.requestBody?.content?.['application/json']?.schema,
              setup,
            });
          }
        }
      } finally {
        await t.close();
      }
    }
  } finally {
    await smtp.stop();
  }
  return [...found.values()];
}

const ROUTES = await securedRoutes();
const KEYS = { HS256: HS, RS256: { JWT_ALGORITHM: 'RS256' } } as const;

describe(`the secured routes found in /openapi.json (${ROUTES.length})`, () => {
  it('include every signed-in auth route and every storage route', () => {
    const names = ROUTES.map((r) => `${r.method} ${r.path}`);
    for (const expected of [
      'POST /auth/token/revoke',
      'POST /auth/change-password',
      'POST /auth/change-email',
      'POST /auth/change-email/request',
      'POST /auth/delete',
      'POST /auth/mfa/generate',
      'POST /auth/mfa/enable',
      'POST /auth/mfa/disable',
      'POST /auth/providers/{provider}/unlink',
      'GET /auth/providers/{provider}/tokens',
      'POST /storage/o/{*}',
      'GET /storage/o/{*}',
      'DELETE /storage/o/{*}',
      'GET /storage/m/{*}',
      'DELETE /storage/m/{*}',
    ]) {
      assert.ok(names.includes(expected), `${expected} is among ${names.join(', ')}`);
    }
  });
});

for (const kind of dbKinds()) {
  for (const [alg, keys] of Object.entries(KEYS)) {
    describe(`${ROUTES.length} secured routes refuse forged credentials [${kind}, ${alg}]`, () => {
      const apps = new Map<string, TestApp>();
      let smtp: TestSmtp;
      before(async () => {
        smtp = await startSmtp();
        for (const [setup, overrides] of Object.entries(SETUPS)) {
          apps.set(setup, await buildTestApp(kind, { ...keys, ...overrides(smtp) }));
        }
      });
      after(async () => {
        for (const t of apps.values()) await t.close();
        await smtp.stop();
      });

      /**
       * One account per setup for the cases whose request is refused before any handler runs (a refused
       * request changes nothing, so they can share it), and its forged tokens, made once.
       */
      const shared = new Map<
        string,
        Promise<{ jwt: string; userId: string; forged: Record<string, string> }>
      >();
      const sharedAccount = (setup: string) => {
        let account = shared.get(setup);
        if (!account) {
          const t = apps.get(setup) as TestApp;
          account = signUp(t).then(async (s) => ({ ...s, forged: await forgedTokens(t, s.jwt) }));
          shared.set(setup, account);
        }
        return account;
      };

      for (const route of ROUTES) {
        const app = () => apps.get(route.setup) as TestApp;
        const urlFor = (userId: string) => route.path.replace('{*}', `user/${userId}/file.txt`);
        /** A new account's valid token, for the cases that reach a handler (which may change the account). */
        const signedIn = async () => {
          const s = await signUp(app());
          return { ...s, url: urlFor(s.userId) };
        };
        /** The shared account, for the cases refused before any handler. */
        const refusedCaller = async () => {
          const s = await sharedAccount(route.setup);
          return { ...s, url: urlFor(s.userId) };
        };
        const call = (url: string, headers: Record<string, string>) => {
          if (route.method === 'POST' && url.startsWith('/storage/o/')) {
            const form = multipartBody([{ name: 'file', filename: 'f.txt', type: 'text/plain', data: 'x' }]);
            return app().app.inject({
              method: 'POST',
              url,
              payload: form.payload,
              headers: { ...form.headers, ...headers },
            });
          }
          return app().app.inject({
            method: route.method as 'GET',
            url,
            payload: route.body ? (example(route.body) as never) : undefined,
            headers,
          });
        };
        const label = `${route.method} ${route.path}`;
        const refusedAs401 = (res: Awaited<ReturnType<typeof call>>) => {
          assert.equal(res.statusCode, 401, res.body);
          assert.ok(['UNAUTHENTICATED', 'CANNOT_DELETE_ACCOUNT'].includes(res.json().code), res.body);
        };

        it(`${label} lets a valid token through to its handler (the cases below test the credential)`, async () => {
          const { jwt, url } = await signedIn();
          const res = await call(url, { authorization: `Bearer ${jwt}` });
          const code = res.body === '' ? undefined : res.json().code;
          assert.ok(!['UNAUTHENTICATED', 'CANNOT_DELETE_ACCOUNT'].includes(code), res.body);
        });

        it(`${label} ${route.required ? 'answers 401' : 'serves no other user’s file'} without a token`, async () => {
          const { url } = await refusedCaller();
          const res = await call(url, {});
          if (route.required) refusedAs401(res);
          else assert.ok([403, 404].includes(res.statusCode), `${res.statusCode} ${res.body}`);
        });

        for (const [name, what] of Object.entries(FORGERIES)) {
          it(`${label} answers 401 to a token with ${what}`, async () => {
            const { forged: tokens, url } = await refusedCaller();
            const forged = tokens[name] as string;
            refusedAs401(await call(url, { authorization: `Bearer ${forged}` }));
          });
        }

        it(`${label} answers 401 to a malformed Authorization header`, async () => {
          const { jwt, url } = await refusedCaller();
          refusedAs401(await call(url, { authorization: `Token ${jwt}` }));
        });

        if (route.required) {
          it(`${label} answers 401 once the account is deleted (revoked)`, async () => {
            const { jwt, userId, url } = await signedIn();
            await app().ctx.db.query('test-delete-user', 'DELETE FROM public.users WHERE id = $1', [userId]);
            // Deleted by SQL, as an application would: the instance hears it through LISTEN/NOTIFY, which
            // the contract gives one second. Routes that read the account refuse at once; the others
            // (GET /auth/hasura reads nothing) within that second.
            const deadline = Date.now() + 1000;
            let res = await call(url, { authorization: `Bearer ${jwt}` });
            while (res.statusCode !== 401 && Date.now() < deadline) {
              await new Promise((r) => setTimeout(r, 50));
              res = await call(url, { authorization: `Bearer ${jwt}` });
            }
            refusedAs401(res);
          });
        }
      }
    });
  }
}
