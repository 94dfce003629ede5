/** TypeBox pieces of the MFA routes. */
import { Type } from '@sinclair/typebox';

/** Six digits, as a string: a number-typed code is refused (leading zeros would be lost). */
export const Code = Type.String({
  minLength: 6,
  maxLength: 6,
  pattern: '^[0-9]{6}$',
  description: 'The current six-digit code from the authenticator app.',
});

export const MfaErrorResponse = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String(),
  code: Type.String(),
  requestId: Type.Optional(Type.String()),
});

/** Error responses a route documents, by status. */
export function errorResponses(...statuses: number[]): Record<number, typeof MfaErrorResponse> {
  return Object.fromEntries(statuses.map((s) => [s, MfaErrorResponse]));
}

export const NoContent = Type.Null({ description: 'No content' });
