/**
 * Start-up work of the auth side against the database, run by the composition root (context.ts) once
 * the schema is migrated and before any request is served:
 * - custom-field settings must name real public.users columns (HBP failed on the first registration
 *   instead), and the configured roles must exist in auth.roles (HBP answered 500 when they did not);
 * - every sealed value the configuration will need to open (TOTP secrets with MFA on, provider tokens
 *   when they are stored) must be sealed under a configured key: a start with the wrong key refuses,
 *   instead of answering 500 at the sign-in that meets the first such value;
 * - with MFA on, TOTP secrets left in clear by HBP or sealed under a retired key are re-encrypted.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { ensureRoles, userColumns } from './accounts-store.ts';
import { resealSecrets } from './mfa/mfa.ts';
import type { SecretBox } from './mfa/secret-box.ts';
import { type SealedKind, sealedKeyUses } from './sealed-store.ts';

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
    ...new Set([
      ...c.ALLOWED_USER_ROLES,
      c.DEFAULT_USER_ROLE,
      c.DEFAULT_ANONYMOUS_ROLE,
      ...(c.ADMIN_ROLE ? [c.ADMIN_ROLE] : []),
    ]),
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

const WHAT: Record<SealedKind, string> = {
  totp: 'TOTP secrets (MFA)',
  'pending-totp': 'TOTP secrets being set up',
  'provider-tokens': 'stored provider tokens',
};

const FORGET: Record<SealedKind, string> = {
  totp: "UPDATE auth.accounts SET otp_secret = NULL, mfa_enabled = false WHERE otp_secret LIKE 'gh1:<id>:%'",
  'pending-totp': "UPDATE auth.account_mfa SET pending_secret = NULL WHERE pending_secret LIKE 'gh1:<id>:%'",
  'provider-tokens': "DELETE FROM auth.account_provider_tokens WHERE sealed_tokens LIKE 'gh1:<id>:%'",
};

/** Sealed values in the database that none of the configured keys opens: the start cannot go on. */
export class SealedKeyMismatch extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SealedKeyMismatch';
  }
}

/**
 * Refuses to start when values of `kinds` in the database were sealed under a key that is neither
 * MFA_ENCRYPTION_KEY nor one of MFA_ENCRYPTION_PREVIOUS_KEYS (one query over the key ids, no decryption).
 * The usual cause in development is another secret than the one generated into DATA_DIR: a different
 * DATA_DIR, or an MFA_ENCRYPTION_KEY that a copied `.env` brought in.
 */
export async function checkSealedKeys(
  deps: { config: Pick<Config, 'DATA_DIR' | 'MFA_ENCRYPTION_KEY'>; db: Database; box: SecretBox },
  kinds: readonly SealedKind[],
): Promise<void> {
  const unknown = (await sealedKeyUses(deps.db, kinds)).filter((u) => !deps.box.opensKey(u.keyId));
  if (unknown.length === 0) return;
  const found = unknown.map((u) => `${u.count} ${WHAT[u.kind]} under key id ${u.keyId}`).join(', ');
  const forget = unknown.map((u) => FORGET[u.kind].replace('<id>', u.keyId)).join('; ');
  const source = deps.config.MFA_ENCRYPTION_KEY
    ? 'MFA_ENCRYPTION_KEY is set (from the environment or a .env file)'
    : `MFA_ENCRYPTION_KEY is unset, so the secret generated in ${deps.config.DATA_DIR}/keys/mfa-encryption.secret is used`;
  throw new SealedKeyMismatch(
    `the database holds values sealed under an MFA encryption key that is not configured (${found}; the configured key id is ${deps.box.currentKeyId}). ${source}. Set MFA_ENCRYPTION_KEY to the secret that sealed them (or add it to MFA_ENCRYPTION_PREVIOUS_KEYS when rotating); if a .env file set MFA_ENCRYPTION_KEY by mistake, remove it there. If that secret is lost, those values cannot be recovered; forget them (${forget}), and the people concerned set MFA up (or link the provider) again.`,
  );
}
