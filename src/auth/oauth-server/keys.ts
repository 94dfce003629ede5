/**
 * The key that signs the authorization server's tokens (access tokens of RFC 9068, ID tokens). It must
 * be asymmetric: resource servers verify with the public half from /auth/jwks, and a shared secret would
 * let each of them mint tokens for the others. With an asymmetric JWT_ALGORITHM the access-token key
 * serves (its rotation included); with HS* a separate OAUTH_SERVER_KEY is required (config.ts refuses the
 * start without one).
 */
import { createPublicKey } from 'node:crypto';
import { type CryptoKey, calculateJwkThumbprint, exportJWK, importPKCS8, importSPKI, type JWK } from 'jose';
import type { Config } from '../../config.ts';
import { isHmac, KeyError, parsePrivate } from '../key-material.ts';
import { type JwtKeys, publishedJwks, signingKeyAt, verifyingKeysAt } from '../keys.ts';

export interface OAuthKeys {
  readonly algorithm: string;
  /** The key that signs at `now`, with its kid. */
  signer(now: Date): { kid: string | undefined; key: CryptoKey };
  /** The keys that verify at `now`, by kid. */
  verifiers(now: Date): { kid: string | undefined; key: CryptoKey }[];
  /** Public keys to publish in /auth/jwks beside the access-token keys (none when they are the same). */
  readonly extraJwks: JWK[];
}

export async function loadOAuthKeys(config: Config, keys: JwtKeys): Promise<OAuthKeys> {
  if (config.OAUTH_SERVER_KEY) {
    const alg = config.OAUTH_SERVER_ALGORITHM;
    const priv = parsePrivate(config.OAUTH_SERVER_KEY, alg, 'OAUTH_SERVER_KEY');
    const pub = createPublicKey(priv);
    const jwk = await exportJWK(pub);
    const kid = await calculateJwkThumbprint(jwk);
    const signKey = await importPKCS8(priv.export({ format: 'pem', type: 'pkcs8' }) as string, alg);
    const verifyKey = await importSPKI(pub.export({ format: 'pem', type: 'spki' }) as string, alg);
    return {
      algorithm: alg,
      signer: () => ({ kid, key: signKey }),
      verifiers: () => [{ kid, key: verifyKey }],
      extraJwks: [{ ...jwk, kid, alg, use: 'sig' }],
    };
  }
  if (isHmac(keys.algorithm))
    throw new KeyError(
      `OAUTH_SERVER_ENABLED needs OAUTH_SERVER_KEY while JWT_ALGORITHM is ${keys.algorithm} (a shared secret)`,
    );
  return {
    algorithm: keys.algorithm,
    signer: (now) => signingKeyAt(keys, now),
    verifiers: (now) => verifyingKeysAt(keys, now).map((k) => ({ kid: k.kid, key: k.verifyCryptoKey })),
    extraJwks: [],
  };
}

/** Every key /auth/jwks publishes: the access-token keys and the authorization server's own. */
export function allPublishedJwks(keys: JwtKeys, oauth: OAuthKeys | undefined, now: Date): JWK[] {
  return [...publishedJwks(keys, now), ...(oauth?.extraJwks ?? [])];
}
