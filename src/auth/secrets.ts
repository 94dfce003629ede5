/**
 * Small crypto helpers shared by sessions and tickets: opaque values are stored only as SHA-256 digests.
 * Secrets are compared with secretsEqual (src/constant-time.ts).
 */
import { createHash, randomBytes } from 'node:crypto';

/** Hex SHA-256 of the UTF-8 text: how refresh tokens and tickets are kept at rest. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** A new refresh token: 256 random bits, base64url. */
export function newRefreshToken(): string {
  return randomBytes(32).toString('base64url');
}
