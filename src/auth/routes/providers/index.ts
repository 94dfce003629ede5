/**
 * The /auth/providers routes, registered only when at least one provider is enabled; a disabled or
 * unknown provider answers 404 like any unknown path.
 */
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../../context.ts';
import { type OAuthDeps, ProviderRegistry, providerTokenBox } from '../../flows/oauth.ts';
import { providerCallbackRoute } from './callback.ts';
import { providerStartRoute } from './start.ts';
import { providerTokensRoute } from './tokens.ts';
import { providerUnlinkRoute } from './unlink.ts';

export async function providerRoutes(app: FastifyInstance, { ctx }: { ctx: AppContext }): Promise<void> {
  const registry = new ProviderRegistry(ctx);
  if (registry.providers.size === 0) return;
  const deps: OAuthDeps = { ...ctx, registry, box: providerTokenBox(ctx) };
  await app.register(providerStartRoute, { deps });
  await app.register(providerCallbackRoute, { deps });
  await app.register(providerUnlinkRoute, { deps });
  if (ctx.config.PROVIDER_TOKENS_STORED) await app.register(providerTokensRoute, { deps });
}
