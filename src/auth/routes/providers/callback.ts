/**
 * GET /auth/providers/<provider>/callback (Apple: POST with a form body): where the provider sends the
 * browser back. Finishes the sign-in and redirects to the app with a session, the MFA step, or an error
 * code (see flows/oauth.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../../errors.ts';
import { finishProviderSignIn, type OAuthDeps } from '../../flows/oauth.ts';
import { Session } from '../../schemas.ts';
import { requestClient } from '../common.ts';
import { browserBinding, ProviderParam, providerOf, signInFailed, signInSucceeded } from './common.ts';

const param = (description: string, maxLength = 2048) =>
  Type.Optional(Type.String({ maxLength, description }));

/** What providers send back; other parameters (scope, iss, session_state…) are accepted and ignored. */
const CallbackParams = Type.Object(
  {
    state: param('The state sent with the sign-in (OAuth 2.0, OpenID Connect).', 512),
    code: param('The authorization code.'),
    error: param('Set when the provider refused or the person cancelled.', 256),
    oauth_token: param('OAuth 1.0a request token (Twitter).', 512),
    oauth_verifier: param('OAuth 1.0a verifier (Twitter).', 512),
    denied: param('OAuth 1.0a: set when the person cancelled (Twitter).', 512),
    user: param('Apple: the name and email, as JSON, on the first sign-in only.', 4096),
  },
  { additionalProperties: true },
);

const response = {
  200: Type.Union([Session, Type.Object({ mfa: Type.Literal(true), ticket: Type.String() })], {
    description: 'Only without any success redirect configured (development): the session as JSON.',
  }),
  302: Type.Null({
    description: 'Redirect to the success URL (refresh_token or MFA ticket) or the failure URL (error)',
  }),
  ...errorResponses(400, 401, 403, 404, 409, 429, 500, 502, 503),
};

export const providerCallbackRoute: FastifyPluginAsyncTypebox<{ deps: OAuthDeps }> = async (
  app,
  { deps },
) => {
  const { registry } = deps;
  const names = [...registry.providers.keys()];

  const finish = async (
    request: FastifyRequest,
    reply: FastifyReply,
    name: string,
    params: Record<string, unknown>,
    method: 'GET' | 'POST',
  ) => {
    const provider = providerOf(deps, name);
    // Each provider comes back one way only: Apple by POST, the others by GET.
    if ((provider.responseMode === 'form_post') !== (method === 'POST')) throw new AppError('NOT_FOUND');
    const strings = Object.fromEntries(
      Object.entries(params).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
    try {
      const outcome = await finishProviderSignIn(deps, {
        provider,
        params: strings,
        binding: browserBinding(request, provider),
        client: requestClient(request),
      });
      return signInSucceeded(deps, reply, outcome);
    } catch (err) {
      return signInFailed(deps, request, reply, provider.name, err);
    }
  };

  app.get(
    '/providers/:provider/callback',
    {
      schema: {
        tags: ['auth', 'providers'],
        summary: 'The redirect URL registered with the provider: finishes the sign-in',
        params: ProviderParam(names.filter((n) => registry.get(n)?.responseMode === 'query')),
        querystring: CallbackParams,
        response,
      },
    },
    (request, reply) => finish(request, reply, request.params.provider, request.query, 'GET'),
  );

  // response_mode=form_post (Apple): a cross-site form POST; the form parser lives only in this context.
  const formPost = registry.formPostNames();
  const formCallback: FastifyPluginAsyncTypebox = async (form) => {
    form.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 64 * 1024 },
      (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
    );
    form.post(
      '/providers/:provider/callback',
      {
        schema: {
          tags: ['auth', 'providers'],
          summary: 'Providers that come back with a cross-site form POST (response_mode=form_post: Apple)',
          consumes: ['application/x-www-form-urlencoded'],
          params: ProviderParam(formPost),
          body: CallbackParams,
          response,
        },
      },
      (request, reply) => finish(request, reply, request.params.provider, request.body, 'POST'),
    );
  };
  if (formPost.length > 0) await app.register(formCallback);
};
