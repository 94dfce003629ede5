import { after, before, describe } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { HS, signUp } from './helpers.ts';
import { type ProtectedRoute, securityCases } from './security-cases.ts';

const ROUTES: ProtectedRoute[] = [
  { method: 'POST', url: '/auth/token/revoke', payload: {} },
  {
    method: 'POST',
    url: '/auth/change-password',
    payload: { old_password: 'x', new_password: 'new password 1' },
  },
  { method: 'POST', url: '/auth/change-email', payload: { new_email: 'someone.else@example.com' } },
  { method: 'POST', url: '/auth/delete', payload: {} },
];

const KEYS = { HS256: HS, RS256: { JWT_ALGORITHM: 'RS256' } } as const;

for (const kind of dbKinds()) {
  for (const [alg, keyConfig] of Object.entries(KEYS)) {
    describe(`protected auth routes refuse bad credentials [${kind}, ${alg}]`, () => {
      let t: TestApp;
      before(async () => {
        t = await buildTestApp(kind, {
          ...keyConfig,
          ALLOW_USER_SELF_DELETE: true,
          RATE_LIMIT_ENABLED: false,
        });
      });
      after(() => t.close());
      for (const route of ROUTES) {
        securityCases(route, {
          app: () => t,
          validToken: async () => {
            const s = await signUp(t);
            return { jwt: s.jwt, userId: s.userId };
          },
        });
      }
    });
  }
}
