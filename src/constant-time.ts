/**
 * The one comparison of secrets (admin secret, tokens, codes, nonces, state bindings): in constant time,
 * so a caller timing the answer learns nothing about where a guess differs.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Whether two secrets are equal, without leaking where they differ. Both sides are hashed first so the
 * lengths always match (timingSafeEqual needs equal lengths, and comparing lengths directly would leak
 * them).
 */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}
