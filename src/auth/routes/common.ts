/** Small pieces shared by the auth route files. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { REFRESH_COOKIE } from '../../http/identity.ts';

/**
 * A POST without a body is validated as `{}`, so the answer names the missing field
 * (`"email" is required`) and routes without required fields accept a bare POST.
 */
export async function bodyDefaultsToObject(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

/**
 * The refresh token a request presents: the `refresh_token` query parameter, else the signed cookie.
 * An explicit query token wins, and a cookie with a bad signature is ignored (HBP let it override a good
 * query token).
 */
export function presentedRefreshToken(
  request: FastifyRequest,
  query: { refresh_token?: string },
): { value: string; source: 'query' | 'cookie' } | undefined {
  if (query.refresh_token) return { value: query.refresh_token, source: 'query' };
  const raw = request.cookies?.[REFRESH_COOKIE];
  if (!raw) return undefined;
  const unsigned = request.unsignCookie(raw);
  return unsigned.valid && unsigned.value ? { value: unsigned.value, source: 'cookie' } : undefined;
}
