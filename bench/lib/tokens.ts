import { SignJWT } from 'jose';

export const BENCH_JWT_KEY = 'bench-secret-bench-secret-bench-secret-0123';
export const BENCH_USER = '6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b';

/**
 * Service settings that let the bench mint its own access tokens (HS256, known key), living as long as
 * the service's (it refuses tokens that live longer than JWT_EXPIRES_IN).
 */
export const HS_ENV = { JWT_ALGORITHM: 'HS256', JWT_KEY: BENCH_JWT_KEY, JWT_EXPIRES_IN: '60' };

/** An access token for BENCH_USER with Hasura claims, valid for an hour. */
export async function benchToken(userId = BENCH_USER): Promise<string> {
  return new SignJWT({
    'https://hasura.io/jwt/claims': {
      'x-hasura-user-id': userId,
      'x-hasura-allowed-roles': ['user'],
      'x-hasura-default-role': 'user',
    },
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(userId)
    .setIssuer('nhost')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(BENCH_JWT_KEY));
}
