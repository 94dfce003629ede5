/**
 * GET /auth/providers/<provider>[?redirect_to=…&cookie=false]: starts a sign-in with the provider (302
 * to its authorization page). Called with a session (bearer token, or the session cookie from this
 * service's own pages), it links the provider to that account instead, which needs a recent sign-in.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../../errors.ts';
import { crossSiteCheck } from '../../../http/csrf.ts';
import { PERMISSION_COOKIE, signedCookie } from '../../../http/identity.ts';
import { type OAuthDeps, startProviderSignIn } from '../../flows/oauth.ts';
import { checkRedirect, RedirectTo } from '../../redirects.ts';
import { CookieFlag } from '../../schemas.ts';
import { reauthentication } from '../common.ts';
import { bindBrowser, ProviderParam, providerOf, signInFailed, successTarget } from './common.ts';

export const providerStartRoute: FastifyPluginAsyncTypebox<{ deps: OAuthDeps }> = async (app, { deps }) => {
  const checkCrossSite = crossSiteCheck(deps.config);

  /** The signed-in caller whose account the provider would be linked to, if the request has a session. */
  async function linkingUser(request: FastifyRequest): Promise<string | undefined> {
    if (request.headers.authorization === undefined) {
      if (signedCookie(request, PERMISSION_COOKIE) === undefined) return undefined;
      // A link started by cookie must come from an allowed page, even as a GET: otherwise any site could
      // send a signed-in browser here and have it link whatever identity the provider holds for it.
      checkCrossSite(request, { evenIfSafe: true });
    }
    return (await request.identity())?.['user-id'];
  }

  const schema = {
    tags: ['auth', 'providers'],
    summary: 'Start a sign-in with a provider (302 to its authorization page)',
    description:
      'With a session (bearer token, or the session cookie from an allowed page) the provider is linked to that account; this needs a sign-in within SENSITIVE_ACTION_WINDOW.',
    params: ProviderParam([...deps.registry.providers.keys()]),
    querystring: Type.Object(
      {
        redirect_to: Type.Optional(RedirectTo),
        cookie: Type.Optional(CookieFlag),
      },
      { additionalProperties: false },
    ),
    response: {
      302: Type.Null({
        description: "Redirect to the provider's authorization page, or to the failure URL",
      }),
      ...errorResponses(400, 401, 403, 404, 429, 500, 502, 503),
    },
  };

  // HBP's router answered with a trailing slash too (hidden from the API document).
  for (const [path, hide] of [
    ['/providers/:provider', false],
    ['/providers/:provider/', true],
  ] as const) {
    app.get(path, { schema: { ...schema, hide } }, async (request, reply) => {
      const provider = providerOf(deps, request.params.provider);
      const redirectTo = checkRedirect(deps.config, request.query.redirect_to);
      // In production a sign-in must land on the app: say so now, before the person meets the provider.
      if (deps.config.isProduction && !successTarget(deps, redirectTo))
        throw new AppError('REDIRECT_NOT_CONFIGURED');
      const userId = await linkingUser(request);
      try {
        const url = await startProviderSignIn(deps, {
          provider,
          binding: bindBrowser(deps, request, reply, provider),
          redirectTo,
          useCookie: request.query.cookie ?? true,
          link: userId === undefined ? undefined : { userId, reauth: reauthentication(request, undefined) },
        });
        return reply.redirect(url, 302);
      } catch (err) {
        return signInFailed(deps, request, reply, provider.name, err);
      }
    });
  }
};
