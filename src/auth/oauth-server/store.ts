/**
 * SQL of the authorization server: clients, consents, codes, token families and refresh tokens
 * (migration 0019). Codes, client secrets and refresh tokens arrive here already hashed.
 */
import type { Queryable } from '../../db/database.ts';

export interface ClientRow {
  id: string;
  secret_hash: string | null;
  name: string;
  redirect_uris: string[];
  logo_uri: string | null;
  origin: 'operator' | 'registration';
  created_at: Date;
}

export async function insertClient(db: Queryable, c: Omit<ClientRow, 'created_at'>): Promise<void> {
  await db.query(
    'InsertOAuthClient',
    `INSERT INTO auth.oauth_clients (id, secret_hash, name, redirect_uris, logo_uri, origin)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [c.id, c.secret_hash, c.name, c.redirect_uris, c.logo_uri, c.origin],
  );
}

export async function findClient(db: Queryable, id: string): Promise<ClientRow | undefined> {
  const { rows } = await db.query<ClientRow>(
    'FindOAuthClient',
    'SELECT id, secret_hash, name, redirect_uris, logo_uri, origin, created_at FROM auth.oauth_clients WHERE id = $1',
    [id],
  );
  return rows[0];
}

export async function listClients(db: Queryable): Promise<ClientRow[]> {
  const { rows } = await db.query<ClientRow>(
    'ListOAuthClients',
    'SELECT id, secret_hash, name, redirect_uris, logo_uri, origin, created_at FROM auth.oauth_clients ORDER BY created_at',
  );
  return rows;
}

/**
 * Deletes a client with the consents people gave it and its token families: the families' ids (to revoke)
 * and the accounts that had allowed it, or undefined when there was no such client.
 */
export async function deleteClient(
  db: Queryable,
  id: string,
): Promise<{ families: string[]; accounts: string[] } | undefined> {
  const { rowCount } = await db.query('DeleteOAuthClient', 'DELETE FROM auth.oauth_clients WHERE id = $1', [
    id,
  ]);
  if (rowCount === 0) return undefined;
  const { rows: consents } = await db.query<{ account_id: string }>(
    'DeleteOAuthClientConsents',
    'DELETE FROM auth.oauth_consents WHERE client_id = $1 RETURNING account_id',
    [id],
  );
  const { rows } = await db.query<{ id: string }>(
    'DeleteOAuthClientFamilies',
    'DELETE FROM auth.oauth_token_families WHERE client_id = $1 RETURNING id',
    [id],
  );
  return { families: rows.map((r) => r.id), accounts: consents.map((c) => c.account_id) };
}

export interface ConsentRow {
  client_id: string;
  client_name: string;
  scopes: string[];
  resources: string[];
  created_at: Date;
  updated_at: Date;
  last_used_at: Date | null;
}

export async function findConsent(
  db: Queryable,
  accountId: string,
  clientId: string,
): Promise<{ scopes: string[]; resources: string[] } | undefined> {
  const { rows } = await db.query<{ scopes: string[]; resources: string[] }>(
    'FindOAuthConsent',
    'SELECT scopes, resources FROM auth.oauth_consents WHERE account_id = $1 AND client_id = $2',
    [accountId, clientId],
  );
  return rows[0];
}

/** Records consent; an earlier one of the same client is widened to cover both. */
export async function upsertConsent(
  db: Queryable,
  c: { accountId: string; clientId: string; clientName: string; scopes: string[]; resources: string[] },
  now: Date,
): Promise<boolean> {
  const { rows } = await db.query<{ inserted: boolean }>(
    'UpsertOAuthConsent',
    `INSERT INTO auth.oauth_consents (account_id, client_id, client_name, scopes, resources, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6)
     ON CONFLICT (account_id, client_id) DO UPDATE SET
       client_name = EXCLUDED.client_name,
       scopes = ARRAY(SELECT DISTINCT unnest(auth.oauth_consents.scopes || EXCLUDED.scopes) ORDER BY 1),
       resources = ARRAY(SELECT DISTINCT unnest(auth.oauth_consents.resources || EXCLUDED.resources) ORDER BY 1),
       updated_at = EXCLUDED.updated_at
     RETURNING (xmax = 0) AS inserted`,
    [c.accountId, c.clientId, c.clientName, c.scopes, c.resources, now],
  );
  return rows[0]?.inserted ?? false;
}

export async function listConsents(db: Queryable, accountId: string): Promise<ConsentRow[]> {
  const { rows } = await db.query<ConsentRow>(
    'ListOAuthConsents',
    `SELECT c.client_id, c.client_name, c.scopes, c.resources, c.created_at, c.updated_at,
            (SELECT max(f.last_used_at) FROM auth.oauth_token_families f
              WHERE f.account_id = c.account_id AND f.client_id = c.client_id) AS last_used_at
       FROM auth.oauth_consents c WHERE c.account_id = $1 ORDER BY c.created_at DESC`,
    [accountId],
  );
  return rows;
}

/**
 * Withdraws a person's consent to a client and deletes its token families (their refresh tokens go with
 * them); the families' ids, to revoke their access tokens, or undefined when there was no consent.
 */
export async function deleteGrant(
  db: Queryable,
  accountId: string,
  clientId: string,
): Promise<string[] | undefined> {
  const { rowCount } = await db.query(
    'DeleteOAuthConsent',
    'DELETE FROM auth.oauth_consents WHERE account_id = $1 AND client_id = $2',
    [accountId, clientId],
  );
  const { rows } = await db.query<{ id: string }>(
    'DeleteOAuthFamilies',
    'DELETE FROM auth.oauth_token_families WHERE account_id = $1 AND client_id = $2 RETURNING id',
    [accountId, clientId],
  );
  if (rowCount === 0 && rows.length === 0) return undefined;
  return rows.map((r) => r.id);
}

export interface CodeRow {
  code_hash: string;
  family_id: string;
  client_id: string;
  account_id: string;
  session_id: string;
  redirect_uri: string;
  code_challenge: string;
  scopes: string[];
  resources: string[];
  nonce: string | null;
  auth_time: Date | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}

export async function insertCode(db: Queryable, c: Omit<CodeRow, 'used_at'>): Promise<void> {
  await db.query(
    'InsertOAuthCode',
    `INSERT INTO auth.oauth_codes (code_hash, family_id, client_id, account_id, session_id, redirect_uri,
       code_challenge, scopes, resources, nonce, auth_time, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [
      c.code_hash,
      c.family_id,
      c.client_id,
      c.account_id,
      c.session_id,
      c.redirect_uri,
      c.code_challenge,
      c.scopes,
      c.resources,
      c.nonce,
      c.auth_time,
      c.created_at,
      c.expires_at,
    ],
  );
}

/**
 * Marks a code used and returns it, in one statement (two racing exchanges cannot both win). `fresh`
 * false: the code had been used before (the row is returned so its family can be ended).
 */
export async function consumeCode(
  db: Queryable,
  codeHash: string,
  now: Date,
): Promise<{ row: CodeRow; fresh: boolean } | undefined> {
  const { rows } = await db.query<CodeRow>(
    'ConsumeOAuthCode',
    'UPDATE auth.oauth_codes SET used_at = $2 WHERE code_hash = $1 AND used_at IS NULL RETURNING *',
    [codeHash, now],
  );
  if (rows[0]) return { row: rows[0], fresh: true };
  const { rows: used } = await db.query<CodeRow>(
    'FindUsedOAuthCode',
    'SELECT * FROM auth.oauth_codes WHERE code_hash = $1',
    [codeHash],
  );
  return used[0] ? { row: used[0], fresh: false } : undefined;
}

export async function purgeCodes(db: Queryable, before: Date): Promise<void> {
  await db.query('PurgeOAuthCodes', 'DELETE FROM auth.oauth_codes WHERE expires_at < $1', [before]);
}

export interface FamilyRow {
  id: string;
  account_id: string;
  client_id: string;
  session_id: string;
  scopes: string[];
  resources: string[];
  auth_time: Date | null;
}

export async function insertFamily(db: Queryable, f: FamilyRow, now: Date): Promise<void> {
  await db.query(
    'InsertOAuthFamily',
    `INSERT INTO auth.oauth_token_families (id, account_id, client_id, session_id, scopes, resources, auth_time,
       created_at, last_used_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
    [f.id, f.account_id, f.client_id, f.session_id, f.scopes, f.resources, f.auth_time, now],
  );
}

/** Deletes a family (its refresh tokens with it); whether it existed. */
export async function deleteFamily(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'DeleteOAuthFamily',
    'DELETE FROM auth.oauth_token_families WHERE id = $1',
    [id],
  );
  return rowCount > 0;
}

export async function familyExists(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query(
    'OAuthFamilyExists',
    'SELECT 1 FROM auth.oauth_token_families WHERE id = $1',
    [id],
  );
  return rows.length > 0;
}

export async function insertRefreshToken(
  db: Queryable,
  t: { hash: string; familyId: string; createdAt: Date; expiresAt: Date },
): Promise<void> {
  await db.query(
    'InsertOAuthRefreshToken',
    `INSERT INTO auth.oauth_refresh_tokens (token_hash, family_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
    [t.hash, t.familyId, t.createdAt, t.expiresAt],
  );
}

export interface RefreshRow extends FamilyRow {
  token_hash: string;
  expires_at: Date;
  rotated_at: Date | null;
}

export async function findRefreshToken(db: Queryable, hash: string): Promise<RefreshRow | undefined> {
  const { rows } = await db.query<RefreshRow>(
    'FindOAuthRefreshToken',
    `SELECT t.token_hash, t.expires_at, t.rotated_at, f.id, f.account_id, f.client_id, f.session_id, f.scopes,
            f.resources, f.auth_time
       FROM auth.oauth_refresh_tokens t JOIN auth.oauth_token_families f ON f.id = t.family_id
      WHERE t.token_hash = $1`,
    [hash],
  );
  return rows[0];
}

/** Marks a refresh token rotated; false when another request rotated it first. */
export async function markRotated(db: Queryable, hash: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    'RotateOAuthRefreshToken',
    'UPDATE auth.oauth_refresh_tokens SET rotated_at = $2 WHERE token_hash = $1 AND rotated_at IS NULL',
    [hash, now],
  );
  if (rowCount > 0)
    await db.query(
      'TouchOAuthFamily',
      `UPDATE auth.oauth_token_families SET last_used_at = $2
        WHERE id = (SELECT family_id FROM auth.oauth_refresh_tokens WHERE token_hash = $1)`,
      [hash, now],
    );
  return rowCount > 0;
}

/** Whether the sign-in a grant was given in still stands (not ended, not expired). */
export async function sessionStands(db: Queryable, sessionId: string, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    'OAuthSessionStands',
    'SELECT 1 FROM auth.sessions WHERE id = $1 AND expires_at > $2',
    [sessionId, now],
  );
  return rows.length > 0;
}
