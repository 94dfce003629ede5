/** Helpers of the security-feed suites. */
import assert from 'node:assert/strict';
import { bearer } from '../auth/helpers.ts';
import type { TestApp } from '../helpers/app.ts';

/** An event as GET /auth/security-events answers it. */
export interface FeedEvent {
  id: string;
  type: string;
  created_at: string;
  ip: string | null;
  user_agent: string | null;
  session_id: string | null;
  details: Record<string, unknown>;
}

export const feed = (t: TestApp, jwt: string, query = '') =>
  t.app.inject({ method: 'GET', url: `/auth/security-events${query}`, headers: bearer(jwt) });

/** The auth.accounts id of a user. */
export async function accountIdOf(t: TestApp, userId: string): Promise<string> {
  const { rows } = await t.ctx.db.query<{ id: string }>(
    'test-account-of',
    'SELECT id FROM auth.accounts WHERE user_id = $1',
    [userId],
  );
  assert.ok(rows[0]);
  return rows[0].id;
}
