/**
 * Cookies are always signed (HBP left them unsigned without COOKIE_SECRET, so anyone could forge an
 * identity). Outside production a secret is generated once into DATA_DIR.
 */
import { randomBytes } from 'node:crypto';
import type { CookieSerializeOptions } from '@fastify/cookie';
import { devSecret } from '../auth/keys.ts';
import type { Config } from '../config.ts';

export function cookieSecret(config: Config): string {
  if (config.COOKIE_SECRET) return config.COOKIE_SECRET;
  // config.ts already refuses production without COOKIE_SECRET.
  return devSecret(config, 'cookie.secret', () => randomBytes(32).toString('base64url'));
}

/** Attributes shared by Gatehouse's cookies; `maxAgeS` in seconds. */
export function cookieOptions(config: Config, maxAgeS: number): CookieSerializeOptions {
  return {
    httpOnly: true,
    signed: true,
    path: '/',
    sameSite: config.COOKIE_SAME_SITE,
    secure: config.COOKIE_SECURE,
    maxAge: maxAgeS,
  };
}
