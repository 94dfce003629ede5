/** TypeBox pieces shared by the auth routes: one schema drives validation, types and /openapi.json. */
import { type Static, Type } from '@sinclair/typebox';

export const Email = Type.String({ format: 'email', maxLength: 254, description: 'Email address' });

/** A password as the configured policy allows it (MIN_PASSWORD_LENGTH..128). */
export const Password = (min: number) => Type.String({ minLength: min, maxLength: 128 });

/** An existing password is only checked, never measured: raising MIN_PASSWORD_LENGTH must not lock people out. */
export const CurrentPassword = Type.String({ minLength: 1, maxLength: 128 });

/** The optional `password` of sensitive changes (see auth/reauth.ts). */
export const ReauthPassword = Type.String({
  minLength: 1,
  maxLength: 128,
  description: `The current password. Needed when the session's sign-in is older than SENSITIVE_ACTION_WINDOW seconds (otherwise 403 REAUTHENTICATION_REQUIRED); a wrong one is 401 INCORRECT_PASSWORD and counts as a failed sign-in.`,
});

export const CookieFlag = Type.Boolean({
  description:
    'true (default): the refresh token is set as a signed cookie; false: it is returned in the body.',
});

export const Ticket = Type.String({
  format: 'uuid',
  description: 'The ticket (a uuid) from the email or the login step.',
});

export const User = Type.Object({
  id: Type.String({ format: 'uuid' }),
  display_name: Type.Union([Type.String(), Type.Null()]),
  email: Type.Union([Type.String(), Type.Null()]),
  avatar_url: Type.Optional(Type.String()),
});
export type PublicUser = Static<typeof User>;

export const Session = Type.Object({
  jwt_token: Type.String(),
  jwt_expires_in: Type.Integer({ description: 'Access-token lifetime in milliseconds.' }),
  refresh_token: Type.Optional(Type.String({ description: 'Only when `cookie` is false.' })),
  user: User,
});
export type SessionBody = Static<typeof Session>;

export const NoContent = Type.Null({ description: 'No content' });
