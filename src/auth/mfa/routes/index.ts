/**
 * The /auth/mfa route group, registered only when MFA_ENABLED (so every route answers 404 otherwise).
 * At registration it re-encrypts secrets left in clear by HBP or sealed under a retired key.
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../../context.ts';
import { type MfaDeps, resealSecrets } from '../mfa.ts';
import { SecretBox } from '../secret-box.ts';
import { disableRoute } from './disable.ts';
import { enableRoute } from './enable.ts';
import { generateRoute } from './generate.ts';
import { totpRoute } from './totp.ts';

export async function mfaRoutes(app: FastifyInstance, opts: { ctx: AppContext }): Promise<void> {
  const deps: MfaDeps = { ...opts.ctx, box: SecretBox.fromConfig(opts.ctx.config) };
  const { resealed, unreadable } = await resealSecrets(deps);
  if (resealed > 0) app.log.info({ resealed }, 'TOTP secrets re-encrypted under the current MFA key');
  if (unreadable > 0)
    app.log.error(
      { unreadable },
      'TOTP secrets sealed under a key that is not configured (add it to MFA_ENCRYPTION_PREVIOUS_KEYS)',
    );
  await app.register(generateRoute, { deps });
  await app.register(enableRoute, { deps });
  await app.register(disableRoute, { deps });
  await app.register(totpRoute, { deps });
}
