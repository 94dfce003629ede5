/**
 * A real HBP client, nhost-js-sdk v3, against a listening Gatehouse: register, sign in, read claims,
 * refresh, change the password, change the email, sign out. (Node has no localStorage, so the client gets a Map-backed one.)
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import NhostClientModule from 'nhost-js-sdk/dist/NhostClient.js';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { HS, newEmail } from './helpers.ts';

/** The parts of the SDK's Auth class this test drives. */
interface SdkAuth {
  register(a: { email: string; password: string; options?: unknown }): Promise<{
    session: { jwt_token: string } | null;
    user: { email: string };
  }>;
  login(a: { email: string; password: string }): Promise<{ user: { id: string } }>;
  logout(all?: boolean): Promise<unknown>;
  refreshSession(): Promise<void>;
  changePassword(oldPassword: string, newPassword: string): Promise<void>;
  changeEmail(newEmail: string): Promise<void>;
  getClaim(claim: string): unknown;
  getJWTToken(): string;
  isAuthenticated(): boolean | null;
}
type SdkClient = new (config: Record<string, unknown>) => { auth: SdkAuth };
// The package is CommonJS with `exports.default`.
const NhostClient = (NhostClientModule as unknown as { default: SdkClient }).default;

function memoryStorage() {
  const m = new Map<string, string>();
  return {
    getItem: (k: string) => m.get(k) ?? null,
    setItem: (k: string, v: string) => void m.set(k, v),
    removeItem: (k: string) => void m.delete(k),
  };
}

for (const kind of dbKinds()) {
  describe(`nhost-js-sdk v3 against Gatehouse [${kind}]`, () => {
    let t: TestApp;
    let baseURL: string;
    before(async () => {
      t = await buildTestApp(kind, { ...HS, RATE_LIMIT_ENABLED: false, ALLOWED_USER_ROLES: ['user', 'me'] });
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      baseURL = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    });
    after(() => t.close());

    const client = () =>
      new NhostClient({
        baseURL,
        ssr: false,
        autoLogin: false,
        clientStorage: memoryStorage(),
        clientStorageType: 'web',
      });

    it('registers, signs in, refreshes, changes the password and signs out', async () => {
      const { auth } = client();
      const email = newEmail('sdk');
      try {
        const reg = await auth.register({
          email,
          password: 'sdk password',
          options: { allowedRoles: ['user', 'me'], defaultRole: 'user' },
        });
        assert.ok(reg.session?.jwt_token);
        assert.equal(reg.user.email, email);
        await auth.logout();

        const signIn = await auth.login({ email, password: 'sdk password' });
        assert.equal(auth.isAuthenticated(), true);
        assert.equal(auth.getClaim('x-hasura-user-id'), signIn.user.id);
        assert.deepEqual(auth.getClaim('x-hasura-allowed-roles'), ['user', 'me']);

        const before = auth.getJWTToken();
        t.clock.advance(2000);
        await auth.refreshSession();
        assert.equal(auth.isAuthenticated(), true);
        assert.notEqual(auth.getJWTToken(), before);

        await auth.changePassword('sdk password', 'new sdk password');
        t.clock.advance(2000);
        await auth.refreshSession();
        assert.equal(
          auth.isAuthenticated(),
          true,
          'the client stays signed in after its own password change',
        );
        await auth.logout();
        assert.equal(auth.isAuthenticated(), false);
        await assert.rejects(
          auth.login({ email, password: 'sdk password' }),
          (e: { response?: { status: number } }) => e.response?.status === 401,
        );
        await auth.login({ email, password: 'new sdk password' });
        assert.equal(auth.isAuthenticated(), true);
      } finally {
        await auth.logout();
      }
    });

    it('the email change right after sign-in keeps working', async () => {
      const { auth } = client();
      const email = newEmail('sdk');
      const moved = newEmail('sdk-moved');
      try {
        await auth.register({ email, password: 'sdk password' });
        await auth.logout();
        await auth.login({ email, password: 'sdk password' });
        // The SDK sends only `new_email`: the fresh sign-in is the proof.
        await auth.changeEmail(moved);
        t.clock.advance(2000);
        await auth.refreshSession();
        assert.equal(auth.isAuthenticated(), true, 'the client stays signed in after its own email change');

        // Once the sign-in is older than the window, the same call is refused until the user signs in again.
        for (let i = 0; i < 2; i++) {
          t.clock.advance((t.config.SENSITIVE_ACTION_WINDOW * 1000) / 2 + 1000);
          await auth.refreshSession();
        }
        await assert.rejects(
          auth.changeEmail(newEmail('sdk-late')),
          (e: { response?: { status: number; data?: { code?: string } } }) =>
            e.response?.status === 403 && e.response.data?.code === 'REAUTHENTICATION_REQUIRED',
        );
        await auth.logout();
        await auth.login({ email: moved, password: 'sdk password' });
        assert.equal(auth.isAuthenticated(), true);
      } finally {
        await auth.logout();
      }
    });
  });
}
