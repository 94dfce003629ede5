/**
 * Start-up work of the auth side against the database, run by the composition root (context.ts) once
 * the schema is migrated and before any request is served:
 * - custom-field settings must name real public.users columns (HBP failed on the first registration
 *   instead), and the configured roles must exist in auth.roles (HBP answered 500 when they did not);
 * - with MFA on, TOTP secrets left in clear by HBP or sealed under a retired key are re-encrypted.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { ensureRoles, userColumns } from './accounts-store.ts';
import { resealSecrets } from './mfa/mfa.ts';
import type { SecretBox } from './mfa/secret-box.ts';

export async function ensureAuthSchema(deps: { config: Config; db: Database }): Promise<void> {
  const c = deps.config;
  const columns = await userColumns(deps.db);
  const problems: string[] = [];
  for (const key of ['REGISTRATION_CUSTOM_FIELDS', 'JWT_CUSTOM_FIELDS'] as const) {
    for (const f of c[key]) {
      if (!columns.has(f)) problems.push(`${key} names "${f}", which is not a column of public.users`);
    }
  }
  if (problems.length > 0) throw new Error(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  await ensureRoles(deps.db, [
    ...new Set([...c.ALLOWED_USER_ROLES, c.DEFAULT_USER_ROLE, c.DEFAULT_ANONYMOUS_ROLE]),
  ]);
}

/** Re-encrypts TOTP secrets under the current MFA key and logs what it did (see mfa.ts resealSecrets). */
export async function resealMfaSecrets(
  deps: { db: Database; box: SecretBox },
  log: FastifyBaseLogger,
): Promise<void> {
  const { resealed, unreadable } = await resealSecrets(deps);
  if (resealed > 0) log.info({ resealed }, 'TOTP secrets re-encrypted under the current MFA key');
  if (unreadable > 0)
    log.error(
      { unreadable },
      'TOTP secrets sealed under a key that is not configured (add it to MFA_ENCRYPTION_PREVIOUS_KEYS)',
    );
}
