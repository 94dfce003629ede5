/**
 * The /auth/mfa route group, registered only when MFA_ENABLED (so every route answers 404 otherwise).
 * Secrets are re-encrypted under the current key at start, by the composition root (auth/startup.ts).
 */
import type { FastifyInstance } from 'fastify';
import { signedInContext } from '../../../http/identity.ts';
import type { MfaDeps } from '../mfa.ts';
import { disableRoute } from './disable.ts';
import { enableRoute } from './enable.ts';
import { generateRoute } from './generate.ts';
import { totpRoute } from './totp.ts';

export async function mfaRoutes(app: FastifyInstance, { deps }: { deps: MfaDeps }): Promise<void> {
  // The second step of a sign-in: public, the ticket is the credential.
  await app.register(totpRoute, { deps });
  await app.register(async (signedIn) => {
    signedInContext(signedIn);
    await signedIn.register(generateRoute, { deps });
    await signedIn.register(enableRoute, { deps });
    await signedIn.register(disableRoute, { deps });
  });
}
