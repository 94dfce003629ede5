/**
 * Small crypto helpers shared by sessions and tickets: opaque values are stored only as SHA-256 digests,
 * and secrets are compared in constant time over equal-length digests.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Hex SHA-256 of the UTF-8 text: how refresh tokens and tickets are kept at rest. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** A new refresh token: 256 random bits, base64url. */
export function newRefreshToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * Compares two secrets without leaking where they differ. Both sides are hashed first so the lengths
 * always match (timingSafeEqual needs equal lengths, and comparing lengths directly would leak them).
 */
export function secretsEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a, 'utf8').digest();
  const db = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(da, db);
}
