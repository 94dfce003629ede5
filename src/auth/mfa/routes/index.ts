/**
 * The /auth/mfa route group, registered only when MFA_ENABLED (so every route answers 404 otherwise).
 * Secrets are re-encrypted under the current key at start, by the composition root (auth/startup.ts).
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../../http/identity.ts';
import type { MfaDeps } from '../mfa.ts';
import { disableRoute } from './disable.ts';
import { enableRoute } from './enable.ts';
import { generateRoute } from './generate.ts';
import { totpRoute } from './totp.ts';

export const mfaRoutes: FastifyPluginAsync<{ deps: MfaDeps }> = async (app, { deps }) => {
  // The second step of a sign-in: public, the ticket is the credential.
  await app.register(totpRoute, { deps });
  await app.register(
    signedInRoutes(async (signedIn) => {
      await signedIn.register(generateRoute, { deps });
      await signedIn.register(enableRoute, { deps });
      await signedIn.register(disableRoute, { deps });
    }),
  );
};
