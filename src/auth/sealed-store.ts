/**
 * SQL over every value sealed by the secret box (mfa/secret-box.ts): which keys sealed them, so that a
 * start can check them all in one cheap query instead of a request meeting the first one it cannot open.
 */
import type { Queryable } from '../db/database.ts';

export type SealedKind = 'totp' | 'pending-totp' | 'provider-tokens';

export interface SealedKeyUse {
  kind: SealedKind;
  keyId: string;
  count: number;
}

/** The key ids in the sealed values of `kinds` (format `gh1:<keyid>:…`), with how many values each sealed. */
export async function sealedKeyUses(db: Queryable, kinds: readonly SealedKind[]): Promise<SealedKeyUse[]> {
  if (kinds.length === 0) return [];
  const { rows } = await db.query<{ kind: SealedKind; key_id: string; n: number }>(
    'SealedKeyUses',
    `SELECT kind, key_id, count(*)::int AS n FROM (
       SELECT 'totp' AS kind, split_part(otp_secret, ':', 2) AS key_id
         FROM auth.accounts WHERE otp_secret LIKE 'gh1:%'
       UNION ALL
       SELECT 'pending-totp', split_part(pending_secret, ':', 2)
         FROM auth.account_mfa WHERE pending_secret LIKE 'gh1:%'
       UNION ALL
       SELECT 'provider-tokens', split_part(sealed_tokens, ':', 2)
         FROM auth.account_provider_tokens WHERE sealed_tokens LIKE 'gh1:%'
     ) sealed
     GROUP BY kind, key_id
     ORDER BY kind, key_id`,
  );
  return rows
    .filter((r) => kinds.includes(r.kind))
    .map((r) => ({ kind: r.kind, keyId: r.key_id, count: r.n }));
}
