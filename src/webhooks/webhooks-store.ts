/** The SQL of the webhook sink: what a delivery says of the account an event is about. */
import type { Queryable } from '../db/database.ts';

/** The account's user id and address, read in the event's transaction; undefined when it is gone. */
export async function accountFacts(
  db: Queryable,
  accountId: string,
): Promise<{ user_id: string; email: string | null } | undefined> {
  const { rows } = await db.query<{ user_id: string; email: string | null }>(
    'WebhookAccountFacts',
    'SELECT user_id, email::text AS email FROM auth.accounts WHERE id = $1',
    [accountId],
  );
  return rows[0];
}
