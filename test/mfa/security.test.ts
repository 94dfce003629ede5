import { after, before, describe } from 'node:test';
import { type ProtectedRoute, securityCases } from '../auth/security-cases.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { createAccount } from './helpers.ts';

const ROUTES: ProtectedRoute[] = [
  { method: 'POST', url: '/auth/mfa/generate', payload: {} },
  { method: 'POST', url: '/auth/mfa/enable', payload: { code: '123456' } },
  { method: 'POST', url: '/auth/mfa/disable', payload: { code: '123456' } },
];

const KEYS = {
  HS256: { JWT_ALGORITHM: 'HS256', JWT_KEY: 'a-test-signing-key-of-32-bytes!!' },
  RS256: { JWT_ALGORITHM: 'RS256' },
} as const;

for (const kind of dbKinds()) {
  for (const [alg, keyConfig] of Object.entries(KEYS)) {
    describe(`MFA routes refuse bad credentials [${kind}, ${alg}]`, () => {
      let t: TestApp;
      let n = 0;
      before(async () => {
        t = await buildTestApp(kind, { ...keyConfig, RATE_LIMIT_ENABLED: false });
      });
      after(() => t.close());
      for (const route of ROUTES) {
        securityCases(route, {
          app: () => t,
          validToken: async () => {
            const a = await createAccount(t, `mfa-security-${++n}@example.com`);
            return { jwt: a.token, userId: a.userId };
          },
        });
      }
    });
  }
}
