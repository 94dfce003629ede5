/**
 * The one way the suites make accounts and credentials without going through the routes under test:
 * a test signing key, an account inserted with the service's own data module, an access token minted
 * as a sign-in would mint it, and a full session. Suites that test registration or sign-in use the
 * routes instead (test/auth/helpers.ts signUp).
 */
import { insertAccount } from '../../src/auth/accounts-store.ts';
import { permissionVariables, signAccessToken } from '../../src/auth/jwt.ts';
import { issueSession } from '../../src/auth/sessions.ts';
import { authDeps } from '../../src/context.ts';
import type { TestApp } from './app.ts';

/** The HS256 key of the suites that need a known shared secret (32 bytes and more, as production wants). */
export const HS_KEY = 'test-secret-key-of-at-least-32-bytes-long';
export const HS = { JWT_ALGORITHM: 'HS256', JWT_KEY: HS_KEY } as const;

let n = 0;
/** A unique address per call, so suites never collide. */
export function newEmail(prefix = 'user'): string {
  n += 1;
  return `${prefix}-${process.pid}-${Date.now()}-${n}@example.com`;
}

export interface NewTestAccount {
  email: string;
  password?: string;
  active?: boolean;
  displayName?: string;
}

/** An account made directly in the database (the register route is not under test). */
export async function createAccount(
  t: TestApp,
  input: NewTestAccount,
): Promise<{ accountId: string; userId: string }> {
  const passwordHash = input.password === undefined ? null : await t.ctx.passwords.hash(input.password);
  return t.ctx.db.transaction((tx) =>
    insertAccount(tx, {
      email: input.email,
      passwordHash,
      active: input.active ?? true,
      isAnonymous: false,
      defaultRole: 'user',
      roles: ['user'],
      userData: { display_name: input.displayName ?? input.email },
    }),
  );
}

/**
 * An access token for `userId` (which need not have an account: storage suites use made-up users), as a
 * sign-in at the test clock's current time would mint it.
 */
export async function accessToken(t: TestApp, userId: string, roles = ['user']): Promise<string> {
  const vars = permissionVariables({ userId, defaultRole: roles[0] ?? 'user', roles, customFields: {} }, []);
  const now = t.clock.now();
  return (await signAccessToken(t.ctx.keys, t.config, vars, now, { authTime: now })).token;
}

/** A signed-in caller: a session of the account, its access and refresh tokens. */
export async function signIn(t: TestApp, accountId: string): Promise<{ jwt: string; refresh: string }> {
  const s = await issueSession(authDeps(t.ctx), accountId);
  return { jwt: s.access.token, refresh: s.refreshToken };
}
