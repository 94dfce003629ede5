/**
 * The access-token signing key. HS*: `JWT_KEY` is the shared secret. RS256/384/512, ES256 and EdDSA: a PEM private key
 * from `JWT_KEY`, else HBP's `CUSTOM_DIR/keys/private.pem`, else (outside production only) a key generated
 * once into `DATA_DIR/keys` and reused. An unreadable or mismatched key stops the start: HBP silently
 * replaced it, which logged every user out.
 */
import {
  createPrivateKey,
  createPublicKey,
  createSecretKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  webcrypto,
} from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type CryptoKey, calculateJwkThumbprint, exportJWK, importPKCS8, importSPKI, type JWK } from 'jose';
import type { Config, JwtAlgorithm } from '../config.ts';

export interface JwtKeys {
  algorithm: JwtAlgorithm;
  /** Signs. A secret key for HS*, a private key otherwise. */
  signingKey: KeyObject;
  /** Verifies. The same secret for HS*, the public key otherwise. */
  verifyKey: KeyObject;
  /**
   * The same keys as WebCrypto keys, made once: jose works on CryptoKeys and would otherwise import the
   * KeyObject again on every signature and verification (a sixth of a metadata request's CPU).
   */
  signCryptoKey: CryptoKey;
  verifyCryptoKey: CryptoKey;
  /** RFC 7638 thumbprint; undefined for HS*. */
  kid: string | undefined;
  /** Public JWK published at /auth/jwks; undefined for HS*. */
  publicJwk: JWK | undefined;
  /** Where the key came from, for the start-up log. */
  source: string;
}

export class KeyError extends Error {}

const isHmac = (alg: JwtAlgorithm) => alg.startsWith('HS');

function expectedKeyType(alg: JwtAlgorithm): { type: string; curve?: string } {
  if (alg.startsWith('RS')) return { type: 'rsa' };
  if (alg === 'ES256') return { type: 'ec', curve: 'prime256v1' };
  return { type: 'ed25519' };
}

function generatePem(alg: JwtAlgorithm): string {
  const enc = { format: 'pem', type: 'pkcs8' } as const;
  if (alg.startsWith('RS'))
    return generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: enc,
      publicKeyEncoding: { format: 'pem', type: 'spki' },
    }).privateKey;
  if (alg === 'ES256')
    return generateKeyPairSync('ec', {
      namedCurve: 'prime256v1',
      privateKeyEncoding: enc,
      publicKeyEncoding: { format: 'pem', type: 'spki' },
    }).privateKey;
  return generateKeyPairSync('ed25519', {
    privateKeyEncoding: enc,
    publicKeyEncoding: { format: 'pem', type: 'spki' },
  }).privateKey;
}

function parsePrivate(pem: string, alg: JwtAlgorithm, where: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem.replace(/\\n/g, '\n'));
  } catch {
    throw new KeyError(`${where} is not a valid PEM private key`);
  }
  const want = expectedKeyType(alg);
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (key.asymmetricKeyType !== want.type || (want.curve && curve !== want.curve)) {
    throw new KeyError(
      `${where} holds a ${key.asymmetricKeyType}${curve ? ` ${curve}` : ''} key, which cannot sign ${alg}`,
    );
  }
  return key;
}

/** The settings the key checks read. */
type KeySettings = Pick<Config, 'NODE_ENV' | 'JWT_ALGORITHM' | 'JWT_KEY' | 'CUSTOM_DIR'>;

/**
 * What is wrong with the key settings, found without writing anything: config.ts lists these with every
 * other configuration problem, before anything opens the database. An empty list means loadJwtKeys
 * will find a usable key (or, outside production, generate one).
 */
export function keySettingProblems(c: KeySettings): string[] {
  const alg = c.JWT_ALGORITHM;
  const production = c.NODE_ENV === 'production';
  if (isHmac(alg)) {
    const minBytes = Number(alg.slice(2)) / 8;
    if (!c.JWT_KEY)
      return production
        ? [`JWT_KEY is required in production for ${alg} (a shared secret of at least ${minBytes} bytes)`]
        : [];
    return Buffer.byteLength(c.JWT_KEY) < minBytes
      ? [`JWT_KEY must be at least ${minBytes} bytes long for ${alg}`]
      : [];
  }
  const hbpFile = path.join(c.CUSTOM_DIR, 'keys', 'private.pem');
  try {
    if (c.JWT_KEY) parsePrivate(c.JWT_KEY, alg, 'JWT_KEY');
    else if (existsSync(hbpFile)) parsePrivate(readFileSync(hbpFile, 'utf8'), alg, hbpFile);
    else if (production)
      return [`JWT_KEY (a PEM private key) or the file ${hbpFile} is required in production for ${alg}`];
  } catch (err) {
    if (err instanceof KeyError) return [err.message];
    return [`${hbpFile} cannot be read: ${(err as Error).message}`];
  }
  return [];
}

/** Reads a secret kept in `DATA_DIR/keys/<name>`, creating it on first use (development only). */
export function devSecret(config: Config, name: string, make: () => string): string {
  const file = path.join(config.DATA_DIR, 'keys', name);
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true });
  const value = make();
  try {
    // `wx`: two instances starting together on one DATA_DIR must end up with the same secret.
    writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return readFileSync(file, 'utf8').trim();
  }
  return value;
}

export async function loadJwtKeys(config: Config): Promise<JwtKeys> {
  const alg = config.JWT_ALGORITHM;
  if (isHmac(alg)) {
    let secret = config.JWT_KEY;
    let source = 'JWT_KEY';
    if (!secret) {
      if (config.isProduction) throw new KeyError(`JWT_KEY is required in production for ${alg}`);
      secret = devSecret(config, `jwt-${alg.toLowerCase()}.secret`, () =>
        randomBytes(64).toString('base64url'),
      );
      source = `generated secret in ${path.join(config.DATA_DIR, 'keys')}`;
    }
    const minBytes = Number(alg.slice(2)) / 8;
    if (Buffer.byteLength(secret) < minBytes) {
      throw new KeyError(`JWT_KEY must be at least ${minBytes} bytes long for ${alg}`);
    }
    const key = createSecretKey(Buffer.from(secret, 'utf8'));
    const hmac = await webcrypto.subtle.importKey(
      'raw',
      key.export(),
      { name: 'HMAC', hash: `SHA-${alg.slice(2)}` },
      false,
      ['sign', 'verify'],
    );
    return {
      algorithm: alg,
      signingKey: key,
      verifyKey: key,
      signCryptoKey: hmac,
      verifyCryptoKey: hmac,
      kid: undefined,
      publicJwk: undefined,
      source,
    };
  }

  let privateKey: KeyObject;
  let source: string;
  const hbpFile = path.join(config.CUSTOM_DIR, 'keys', 'private.pem');
  if (config.JWT_KEY) {
    privateKey = parsePrivate(config.JWT_KEY, alg, 'JWT_KEY');
    source = 'JWT_KEY';
  } else if (existsSync(hbpFile)) {
    privateKey = parsePrivate(readFileSync(hbpFile, 'utf8'), alg, hbpFile);
    source = hbpFile;
  } else {
    if (config.isProduction)
      throw new KeyError(`JWT_KEY (or ${hbpFile}) is required in production for ${alg}`);
    const pem = devSecret(config, `jwt-${alg.toLowerCase()}.pem`, () => generatePem(alg).trim());
    privateKey = parsePrivate(pem, alg, path.join(config.DATA_DIR, 'keys', `jwt-${alg.toLowerCase()}.pem`));
    source = `generated key in ${path.join(config.DATA_DIR, 'keys')}`;
  }
  const publicKey = createPublicKey(privateKey);
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  return {
    algorithm: alg,
    signingKey: privateKey,
    verifyKey: publicKey,
    signCryptoKey: await importPKCS8(privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, alg),
    verifyCryptoKey: await importSPKI(publicKey.export({ format: 'pem', type: 'spki' }) as string, alg),
    kid,
    publicJwk: { ...jwk, kid, alg, use: 'sig' },
    source,
  };
}
