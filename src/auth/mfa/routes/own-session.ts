import type { FastifyRequest } from 'fastify';
import { REFRESH_COOKIE } from '../../../http/identity.ts';

/** The caller's refresh token from its signed cookie, when it has one (a tampered cookie counts as none). */
export function ownRefreshToken(request: FastifyRequest): string | undefined {
  const raw = request.cookies?.[REFRESH_COOKIE];
  if (!raw) return undefined;
  const unsigned = request.unsignCookie(raw);
  return unsigned.valid && unsigned.value ? unsigned.value : undefined;
}
