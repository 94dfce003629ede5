/**
 * The /auth/providers routes, registered only when at least one provider is enabled; a disabled or
 * unknown provider answers 404 like any unknown path. Start and callback are public (the start route
 * looks for a session itself, to link); unlink and tokens live in a signed-in context.
 */
import type { FastifyPluginAsync } from 'fastify';
import { signedInRoutes } from '../../../http/identity.ts';
import { documentsOnly, type Gate, gate, notServed, registerWhen } from '../../../http/switched-off.ts';
import type { AuthDeps } from '../../deps.ts';
import { type OAuthDeps, providerTokenBox } from '../../flows/oauth.ts';
import type { SecretBox } from '../../mfa/secret-box.ts';
import type { ProviderRegistry } from '../../oauth/registry.ts';
import { providerCallbackRoute } from './callback.ts';
import { providerStartRoute } from './start.ts';
import { providerTokensRoute } from './tokens.ts';
import { providerUnlinkRoute } from './unlink.ts';

export const providerRoutes: FastifyPluginAsync<{
  deps: AuthDeps;
  mfaBox: SecretBox | undefined;
  registry: ProviderRegistry;
}> = async (app, opts) => {
  const { registry } = opts;
  const anyProvider: Gate = {
    on: registry.providers.size > 0,
    enabledBy: 'a provider, e.g. GITHUB_ENABLED=true (docs/providers.md)',
  };
  await registerWhen(app, anyProvider, async (scope) => {
    // Provider tokens are sealed like TOTP secrets, with the same key (and its rotation).
    // (No box for the instance that only documents the routes: making one may write a key file.)
    const box =
      opts.mfaBox ??
      (documentsOnly(scope) ? notServed<SecretBox>('the provider token box') : providerTokenBox(opts.deps));
    const deps: OAuthDeps = { ...opts.deps, registry, box };
    await scope.register(providerStartRoute, { deps });
    await scope.register(providerCallbackRoute, { deps });
    await scope.register(
      signedInRoutes(async (signedIn) => {
        await signedIn.register(providerUnlinkRoute, { deps });
        await registerWhen(signedIn, gate(deps.config, { PROVIDER_TOKENS_STORED: true }), (s) =>
          s.register(providerTokensRoute, { deps }),
        );
      }),
    );
  });
};
