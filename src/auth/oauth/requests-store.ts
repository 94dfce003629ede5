/**
 * Provider sign-ins in progress (auth.provider_requests): what the start route must remember until the
 * provider sends the browser back. Keys are stored only as SHA-256 digests; a row is used up in the same
 * statement that reads it, so two callbacks with one `state` can never both go on.
 */
import type { Queryable } from '../../db/database.ts';
import { sha256Hex } from '../secrets.ts';

export interface NewProviderRequest {
  /** The `state` sent to the provider (OAuth 1.0a: the request token). */
  key: string;
  provider: string;
  /** The random value of the browser's binding cookie. */
  binding: string;
  codeVerifier?: string;
  nonce?: string;
  requestTokenSecret?: string;
  redirectTo?: string;
  useCookie: boolean;
  linkAccountId?: string;
  createdAt: Date;
  expiresAt: Date;
}

export interface ProviderRequest {
  provider: string;
  bindingHash: string;
  codeVerifier: string | null;
  nonce: string | null;
  requestTokenSecret: string | null;
  redirectTo: string | null;
  useCookie: boolean;
  linkAccountId: string | null;
}

/** Stores a started sign-in, dropping those that expired (every start pays for a little housekeeping). */
export async function insertProviderRequest(db: Queryable, r: NewProviderRequest): Promise<void> {
  await db.query('PurgeProviderRequests', 'DELETE FROM auth.provider_requests WHERE expires_at < $1', [
    r.createdAt,
  ]);
  await db.query(
    'InsertProviderRequest',
    `INSERT INTO auth.provider_requests
       (state_hash, provider, binding_hash, code_verifier, nonce, request_token_secret, redirect_to,
        use_cookie, link_account_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      sha256Hex(r.key),
      r.provider,
      sha256Hex(r.binding),
      r.codeVerifier ?? null,
      r.nonce ?? null,
      r.requestTokenSecret ?? null,
      r.redirectTo ?? null,
      r.useCookie,
      r.linkAccountId ?? null,
      r.createdAt,
      r.expiresAt,
    ],
  );
}

interface Row {
  provider: string;
  binding_hash: string;
  code_verifier: string | null;
  nonce: string | null;
  request_token_secret: string | null;
  redirect_to: string | null;
  use_cookie: boolean;
  link_account_id: string | null;
}

/**
 * Uses up the sign-in of `key` for `provider`, started by the browser whose binding value is `binding`,
 * in one statement. Undefined when it is unknown, of another provider, expired, already used or started
 * by another browser: a state replayed through someone else's browser (or leaked to someone) is left
 * untouched for the browser that started it, so nobody can burn another person's sign-in with it.
 */
export async function consumeProviderRequest(
  db: Queryable,
  key: string,
  provider: string,
  binding: string,
  now: Date,
): Promise<ProviderRequest | undefined> {
  // Both values are compared as SHA-256 digests of random values: nothing to learn from the timing.
  const { rows } = await db.query<Row>(
    'ConsumeProviderRequest',
    `UPDATE auth.provider_requests SET used_at = $3
      WHERE state_hash = $1 AND provider = $2 AND binding_hash = $4 AND used_at IS NULL AND expires_at > $3
      RETURNING provider, binding_hash, code_verifier, nonce, request_token_secret, redirect_to,
                use_cookie, link_account_id`,
    [sha256Hex(key), provider, now, sha256Hex(binding)],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    provider: row.provider,
    bindingHash: row.binding_hash,
    codeVerifier: row.code_verifier,
    nonce: row.nonce,
    requestTokenSecret: row.request_token_secret,
    redirectTo: row.redirect_to,
    useCookie: row.use_cookie,
    linkAccountId: row.link_account_id,
  };
}
