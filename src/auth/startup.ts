/**
 * Start-up checks of the auth side against the database: custom-field settings must name real
 * public.users columns (HBP failed on the first registration instead), and the configured roles must
 * exist in auth.roles (HBP answered 500 when they did not).
 */
import type { AppContext } from '../context.ts';
import { userColumns } from './accounts-store.ts';

export async function ensureAuthSchema(ctx: AppContext): Promise<void> {
  const c = ctx.config;
  const columns = await userColumns(ctx.db);
  const problems: string[] = [];
  for (const key of ['REGISTRATION_CUSTOM_FIELDS', 'JWT_CUSTOM_FIELDS'] as const) {
    for (const f of c[key]) {
      if (!columns.has(f)) problems.push(`${key} names "${f}", which is not a column of public.users`);
    }
  }
  if (problems.length > 0) throw new Error(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
  const roles = [...new Set([...c.ALLOWED_USER_ROLES, c.DEFAULT_USER_ROLE, c.DEFAULT_ANONYMOUS_ROLE])];
  await ctx.db.query(
    'EnsureRoles',
    'INSERT INTO auth.roles (role) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING',
    [roles],
  );
}
