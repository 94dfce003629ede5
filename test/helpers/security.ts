/**
 * The forged credentials every secured route must refuse (test/security/forged-credentials.test.ts
 * runs them against each route the OpenAPI document marks secured): an expired token, a wrong
 * signature, `alg: none`, a different algorithm, a foreign key, a token signed with the right key but
 * without `exp` or with a user id that is not a UUID.
 */
import { createPublicKey, createSecretKey } from 'node:crypto';
import { SignJWT } from 'jose';
import type { TestApp } from '../helpers/app.ts';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

function claimsOf(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1] as string, 'base64url').toString());
}

/** Signs claims with the app's own key, at a chosen time. */
async function signAt(
  t: TestApp,
  claims: Record<string, unknown>,
  iat: number,
  exp: number,
  alg?: string,
  key?: unknown,
) {
  const k = t.ctx.keys;
  const header: { alg: string; kid?: string } = { alg: alg ?? k.algorithm };
  if (!alg && k.kid) header.kid = k.kid;
  const { iat: _i, exp: _e, ...rest } = claims;
  return new SignJWT(rest)
    .setProtectedHeader(header)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign((key ?? k.signingKey) as Parameters<SignJWT['sign']>[0]);
}

/** What each forged token is, for test names. */
export const FORGERIES = {
  expired: 'an expired lifetime',
  'wrong signature': 'a wrong signature',
  'alg none': 'alg none',
  'wrong algorithm': 'a wrong algorithm',
  'foreign key': 'a foreign key',
  'no expiry': 'the right key but no expiry (exp)',
  'non-UUID user id': 'the right key but a user id that is not a UUID',
} as const;

/** Tokens that must never authenticate, built from a valid one. */
export async function forgedTokens(
  t: TestApp,
  valid: string,
): Promise<Record<keyof typeof FORGERIES, string>> {
  const claims = claimsOf(valid);
  const now = Math.floor(t.clock.now().getTime() / 1000);
  const [h, p, s] = valid.split('.') as [string, string, string];
  const flipped = (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
  const other = t.ctx.keys.algorithm.startsWith('HS')
    ? // The same secret under another HS algorithm: verification is pinned to one algorithm.
      await signAt(t, claims, now, now + 600, t.ctx.keys.algorithm === 'HS256' ? 'HS512' : 'HS256')
    : // The classic confusion: HS256 keyed with the public key's PEM.
      await signAt(
        t,
        claims,
        now,
        now + 600,
        'HS256',
        createSecretKey(
          Buffer.from(
            createPublicKey(t.ctx.keys.signingKey).export({ format: 'pem', type: 'spki' }) as string,
          ),
        ),
      );
  const { iat: _i, exp: _e, ...unexpiring } = claims;
  const k = t.ctx.keys;
  const hasura = claims[t.config.JWT_CLAIMS_NAMESPACE] as Record<string, unknown>;
  return {
    'no expiry': await new SignJWT(unexpiring)
      .setProtectedHeader(k.kid ? { alg: k.algorithm, kid: k.kid } : { alg: k.algorithm })
      .setIssuedAt(now)
      .sign(k.signingKey as Parameters<SignJWT['sign']>[0]),
    'non-UUID user id': await signAt(
      t,
      {
        ...claims,
        sub: 'not-a-uuid',
        [t.config.JWT_CLAIMS_NAMESPACE]: { ...hasura, 'x-hasura-user-id': 'not-a-uuid' },
      },
      now,
      now + 600,
    ),
    expired: await signAt(t, claims, now - 3600, now - 60),
    'wrong signature': `${h}.${p}.${flipped}`,
    'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`,
    'wrong algorithm': other,
    'foreign key': await signAt(
      t,
      claims,
      now,
      now + 600,
      'HS256',
      createSecretKey(Buffer.from('x'.repeat(64))),
    ),
  };
}
