/**
 * GET /auth/oauth2/authorize: the authorization request. POST /auth/oauth2/authorize: the consent form's
 * answer. Problems found before the client's redirect URI is trusted are shown on a page (never sent to
 * a redirect URI); later ones go back to the client as RFC 6749 errors.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, errorResponses } from '../../../errors.ts';
import { REFRESH_COOKIE, signedCookie } from '../../../http/identity.ts';
import {
  type AuthorizeParams,
  checkAuthorizeRequest,
  consentCovers,
  consentToken,
  consentTokenValid,
  currentSession,
  issueCode,
  RedirectError,
  redirectWith,
} from '../authorize.ts';
import type { OAuthServerDeps } from '../deps.ts';
import { consentPage, errorPage, pageCsp } from '../pages.ts';
import { acceptForms } from './form.ts';

const Params = {
  type: 'object',
  properties: Object.fromEntries(
    [
      'response_type',
      'client_id',
      'redirect_uri',
      'scope',
      'state',
      'code_challenge',
      'code_challenge_method',
      'nonce',
      'csrf_token',
      'decision',
    ].map((k) => [k, { type: 'string', maxLength: 4096 }]),
  ),
  additionalProperties: true,
} as const;

const Html = { type: 'string', description: 'An HTML page' } as const;
const Redirect = (description: string) => ({ type: 'null', description }) as const;

type Query = AuthorizeParams & { csrf_token?: string; decision?: string };

/** A repeated parameter other than `resource` is a malformed request (RFC 6749 §3.1). */
function flatten(q: Record<string, unknown>): Query {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(q)) {
    if (k === 'resource') out[k] = v;
    else if (Array.isArray(v))
      throw new AppError(
        'OAUTH_REQUEST_INVALID',
        `This authorization request cannot be served: ${k.slice(0, 40)} is repeated.`,
      );
    else out[k] = v;
  }
  return out as Query;
}

function wantsJson(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
}

/** The page (or, for a client asking for JSON, the project's error body) of a refused request. */
function refuse(
  deps: OAuthServerDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  err: unknown,
): FastifyReply {
  if (err instanceof RedirectError) {
    return reply.redirect(
      redirectWith(deps, err.redirectUri, {
        error: err.error,
        error_description: err.description,
        state: err.state,
      }),
      303,
    );
  }
  if (err instanceof AppError && err.statusCode < 500 && !wantsJson(request)) {
    return reply
      .code(err.statusCode)
      .header('content-type', 'text/html; charset=utf-8')
      .header('content-security-policy', pageCsp())
      .send(errorPage(err.message));
  }
  throw err;
}

export const authorizeRoutes: FastifyPluginAsync<{ deps: OAuthServerDeps }> = async (app, { deps }) => {
  acceptForms(app);

  app.get(
    '/authorize',
    {
      schema: {
        tags: ['oauth2'],
        summary:
          'OAuth 2.1 authorization request (code + PKCE S256): sign-in, consent page, then the redirect',
        querystring: Params,
        response: {
          200: { ...Html, description: 'The consent page (HTML)' },
          302: Redirect('To sign in first, or back to the client (consent already given, or an error)'),
          303: Redirect('Back to the client with an error'),
          ...errorResponses(400, 429),
        },
      },
    },
    async (request, reply) => {
      try {
        const r = await checkAuthorizeRequest(deps, flatten(request.query as Record<string, unknown>));
        const session = await currentSession(deps, signedCookie(request, REFRESH_COOKIE));
        if (!session) {
          const login = deps.config.OAUTH_LOGIN_URL;
          return reply.redirect(
            `${login}${login.includes('?') ? '&' : '?'}return_to=${encodeURIComponent(request.url)}`,
            302,
          );
        }
        if (await consentCovers(deps, session.accountId, r)) {
          const { location } = await issueCode(deps, session, r, false);
          return reply.redirect(location, 302);
        }
        return (
          reply
            .header('content-type', 'text/html; charset=utf-8')
            .header('content-security-policy', pageCsp(r.redirectUri))
            // The service's `no-referrer` makes browsers send `Origin: null` with a form post, which the
            // cross-site check refuses; same-origin keeps the origin for this page's own form only.
            .header('referrer-policy', 'same-origin')
            .header('cache-control', 'no-store')
            .send(
              consentPage(r, consentToken(deps, session.sessionId, r), request.url.split('?')[0] as string),
            )
        );
      } catch (err) {
        return refuse(deps, request, reply, err);
      }
    },
  );

  app.post(
    '/authorize',
    {
      schema: {
        tags: ['oauth2'],
        summary: "The consent form's answer (allow or deny), with its session-bound form token",
        consumes: ['application/x-www-form-urlencoded'],
        body: Params,
        response: {
          303: Redirect("Back to the client's redirect URI with the code, or access_denied"),
          ...errorResponses(400, 403, 429),
        },
      },
    },
    async (request, reply) => {
      try {
        const body = flatten(request.body as Record<string, unknown>);
        // cookieCredential refuses a post from another site (Origin), before the form token is looked at.
        const session = await currentSession(deps, request.cookieCredential(REFRESH_COOKIE));
        if (!session) throw new AppError('OAUTH_CONSENT_INVALID');
        const r = await checkAuthorizeRequest(deps, body);
        if (!consentTokenValid(deps, session.sessionId, r, body.csrf_token))
          throw new AppError('OAUTH_CONSENT_INVALID');
        if (body.decision !== 'allow')
          return reply.redirect(
            redirectWith(deps, r.redirectUri, {
              error: 'access_denied',
              error_description: 'the person did not allow the request',
              state: r.state,
            }),
            303,
          );
        const ua = request.headers['user-agent'];
        const { location } = await issueCode(deps, session, r, true, {
          ip: request.ip,
          userAgent: typeof ua === 'string' ? ua : null,
        });
        return reply.redirect(location, 303);
      } catch (err) {
        return refuse(deps, request, reply, err);
      }
    },
  );
};
