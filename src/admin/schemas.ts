/** TypeBox schemas of the admin API's answers, and the mapping of domain rows onto them. */
import { type Static, Type } from '@sinclair/typebox';
import type { AccountListing } from '../auth/accounts-store.ts';
import type { UserDetails } from '../auth/operator.ts';
import type { SessionRow } from '../auth/sessions-store.ts';

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T, description: string) =>
  Type.Union([t, Type.Null()], { description });

/** The `{id}` of an admin route: a user id (`x-hasura-user-id`); anything else is 400. */
export const UserIdParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The user id (the x-hasura-user-id of its tokens).' }),
});

export const AdminUser = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The user id (public.users.id, x-hasura-user-id).' }),
  account_id: Type.String({ format: 'uuid' }),
  email: Nullable(Type.String(), 'null for an anonymous account.'),
  display_name: Nullable(Type.String(), 'public.users.display_name.'),
  active: Type.Boolean({ description: 'false while the account waits for its activation link.' }),
  disabled: Type.Boolean({ description: 'Blocked by an operator: no sign-in, no refresh.' }),
  disabled_at: Nullable(Type.String({ format: 'date-time' }), 'When it was blocked.'),
  email_verified: Type.Boolean({ description: 'The address is proven to be the account holder’s.' }),
  anonymous: Type.Boolean(),
  mfa_enabled: Type.Boolean({ description: 'Two-factor sign-in (TOTP) is on.' }),
  default_role: Type.String(),
  roles: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
});

export function adminUser(a: AccountListing): Static<typeof AdminUser> {
  return {
    id: a.user_id,
    account_id: a.id,
    email: a.email,
    display_name: a.display_name,
    active: a.active,
    disabled: a.disabled_at !== null,
    disabled_at: a.disabled_at?.toISOString() ?? null,
    email_verified: a.email_verified,
    anonymous: a.is_anonymous,
    mfa_enabled: a.mfa_enabled,
    default_role: a.default_role,
    roles: a.roles,
    created_at: a.created_at.toISOString(),
  };
}

export const AdminSession = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The session id: the `sid` of its access tokens.' }),
  created_at: Type.String({ format: 'date-time', description: 'When the sign-in happened.' }),
  last_active_at: Type.String({ format: 'date-time', description: 'The last sign-in or refresh.' }),
  expires_at: Type.String({ format: 'date-time', description: 'When its refresh token expires.' }),
  sign_in_method: Nullable(Type.String(), 'password, magic-link, mfa, oauth:<provider>, anonymous.'),
  user_agent: Nullable(Type.String(), 'The User-Agent of the sign-in.'),
  ip: Nullable(Type.String(), 'The client address of the sign-in.'),
});

export function adminSession(r: SessionRow): Static<typeof AdminSession> {
  return {
    id: r.id,
    created_at: r.created_at.toISOString(),
    last_active_at: r.last_active_at.toISOString(),
    expires_at: r.expires_at.toISOString(),
    sign_in_method: r.sign_in_method,
    user_agent: r.user_agent,
    ip: r.ip,
  };
}

export const AdminUserDetails = Type.Composite([
  AdminUser,
  Type.Object({
    providers: Type.Array(
      Type.Object({
        provider: Type.String({ description: 'github, google, oidc…' }),
        subject: Type.String({ description: 'The provider’s id of the person.' }),
      }),
      { description: 'Provider identities linked to the account.' },
    ),
    sessions: Type.Array(AdminSession, { description: 'Live sessions, newest first.' }),
  }),
]);

export function adminUserDetails(d: UserDetails): Static<typeof AdminUserDetails> {
  return { ...adminUser(d.user), providers: d.providers, sessions: d.sessions.map(adminSession) };
}
