/**
 * The /auth/providers routes, registered only when at least one provider is enabled; a disabled or
 * unknown provider answers 404 like any unknown path. Start and callback are public (the start route
 * looks for a session itself, to link); unlink and tokens live in a signed-in context.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../../http/identity.ts';
import type { AuthDeps } from '../../deps.ts';
import { type OAuthDeps, ProviderRegistry, providerTokenBox } from '../../flows/oauth.ts';
import type { SecretBox } from '../../mfa/secret-box.ts';
import { providerCallbackRoute } from './callback.ts';
import { providerStartRoute } from './start.ts';
import { providerTokensRoute } from './tokens.ts';
import { providerUnlinkRoute } from './unlink.ts';

export const providerRoutes: FastifyPluginAsync<{ deps: AuthDeps; mfaBox: SecretBox | undefined }> = async (
  app,
  opts,
) => {
  const registry = new ProviderRegistry(opts.deps);
  if (registry.providers.size === 0) return;
  // Provider tokens are sealed like TOTP secrets, with the same key (and its rotation).
  const deps: OAuthDeps = { ...opts.deps, registry, box: opts.mfaBox ?? providerTokenBox(opts.deps) };
  await app.register(providerStartRoute, { deps });
  await app.register(providerCallbackRoute, { deps });
  await app.register(
    signedInRoutes(async (signedIn) => {
      await signedIn.register(providerUnlinkRoute, { deps });
      if (deps.config.PROVIDER_TOKENS_STORED) await signedIn.register(providerTokensRoute, { deps });
    }),
  );
};
