/** TypeBox pieces of the MFA routes (the shared ones live in src/auth/schemas.ts). */
import { Type } from '@sinclair/typebox';

/** Six digits, as a string: a number-typed code is refused (leading zeros would be lost). */
export const Code = Type.String({
  minLength: 6,
  maxLength: 6,
  pattern: '^[0-9]{6}$',
  description: 'The current six-digit code from the authenticator app.',
});
