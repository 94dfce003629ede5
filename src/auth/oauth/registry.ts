/**
 * The enabled sign-in providers with their discovery caches, built once by the composition root
 * (context.ts) from the settings: a provider that cannot be built (an unreadable Apple key) is a start
 * error, said with the other settings' problems.
 */
import type { Clock } from '../../clock.ts';
import type { Config } from '../../config.ts';
import type { ProviderHttp } from './http.ts';
import { OidcIssuer } from './oidc.ts';
import { enabledProviders, type OidcProvider, type Provider, type ProviderName } from './providers.ts';

export class ProviderRegistry {
  readonly providers: Map<ProviderName, Provider>;
  readonly http: ProviderHttp;
  private readonly issuers = new Map<ProviderName, OidcIssuer>();

  constructor(config: Config, clock: Clock) {
    this.providers = enabledProviders(config);
    this.http = { timeoutMs: config.PROVIDER_REQUEST_TIMEOUT };
    for (const p of this.providers.values()) {
      if (p.kind === 'oidc')
        this.issuers.set(
          p.name,
          new OidcIssuer(p.issuer, this.http, {
            requireHttps: config.isProduction,
            now: () => clock.now().getTime(),
          }),
        );
    }
  }

  get(name: string): Provider | undefined {
    return this.providers.get(name as ProviderName);
  }

  /** The providers that come back with a cross-site form POST (response_mode=form_post). */
  formPostNames(): ProviderName[] {
    return [...this.providers.values()].filter((p) => p.responseMode === 'form_post').map((p) => p.name);
  }

  issuer(p: OidcProvider): OidcIssuer {
    return this.issuers.get(p.name) as OidcIssuer;
  }
}
