/**
 * The /auth/passkeys route group, registered only when WEBAUTHN_ENABLED (404 otherwise). Sign-in and
 * sign-up are public; adding, listing, renaming, deleting and step-up are for the signed-in caller.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../../http/identity.ts';
import type { AuthDeps } from '../../deps.ts';
import { loginPasskeyRoutes } from './login.ts';
import { managePasskeyRoutes } from './manage.ts';
import { reauthenticatePasskeyRoutes } from './reauthenticate.ts';
import { registerPasskeyRoutes } from './register.ts';
import { signupPasskeyRoutes } from './signup.ts';

export const passkeyRoutes: FastifyPluginAsync<{ deps: AuthDeps }> = async (app, { deps }) => {
  await app.register(loginPasskeyRoutes, { deps });
  await app.register(signupPasskeyRoutes, { deps });
  await app.register(
    signedInRoutes(async (signedIn) => {
      await signedIn.register(registerPasskeyRoutes, { deps });
      await signedIn.register(reauthenticatePasskeyRoutes, { deps });
      await signedIn.register(managePasskeyRoutes, { deps });
    }),
  );
};
