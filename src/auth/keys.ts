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
  type KeyObject,
  randomBytes,
  webcrypto,
} from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type CryptoKey, calculateJwkThumbprint, exportJWK, importPKCS8, importSPKI, type JWK } from 'jose';
import type { Config } from '../config.ts';
import { DIR_MODE } from '../data-dir.ts';
import {
  generatePem,
  isHmac,
  type JwtAlgorithm,
  KeyError,
  keyFiles,
  parsePrevious,
  parsePrivate,
} from './key-material.ts';

export { KeyError, keyFiles } from './key-material.ts';

/** A key that verifies access tokens (and is published at /auth/jwks when asymmetric). */
export interface VerifyingKey {
  /** RFC 7638 thumbprint, the `kid` of the tokens it signs; undefined for HS*. */
  kid: string | undefined;
  verifyCryptoKey: CryptoKey;
  /** The public JWK for /auth/jwks; undefined for HS*. */
  publicJwk: JWK | undefined;
  /** Present when this key may sign (the current key; a retired key given as a private key). */
  signCryptoKey?: CryptoKey;
}

export interface JwtKeys {
  algorithm: JwtAlgorithm;
  /** The current key. Signs. A secret key for HS*, a private key otherwise. */
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
  /** Keys the current one replaced (JWT_PREVIOUS_KEY or the `.previous.pem` file), newest first. */
  previous: readonly VerifyingKey[];
  /** Until then a retired private key still signs (verifiers may not have fetched the new key yet). */
  previousSignsUntil: Date | undefined;
  /** From then on retired keys are neither accepted nor published; undefined: for as long as they are set. */
  previousUntil: Date | undefined;
}

/** Reads a secret kept in `DATA_DIR/keys/<name>`, creating it on first use (development only). */
export function devSecret(config: Config, name: string, make: () => string): string {
  const file = path.join(config.DATA_DIR, 'keys', name);
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true, mode: DIR_MODE });
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

/** The key that signs at `now`: a retired private key until the rotation is published long enough. */
export function signingKeyAt(keys: JwtKeys, now: Date): { kid: string | undefined; key: CryptoKey } {
  if (keys.previousSignsUntil && now < keys.previousSignsUntil) {
    const old = keys.previous.find((k) => k.signCryptoKey);
    if (old?.signCryptoKey) return { kid: old.kid, key: old.signCryptoKey };
  }
  return { kid: keys.kid, key: keys.signCryptoKey };
}

/** Every key that verifies at `now`, the signing one first. */
export function verifyingKeysAt(keys: JwtKeys, now: Date): VerifyingKey[] {
  const current: VerifyingKey = {
    kid: keys.kid,
    verifyCryptoKey: keys.verifyCryptoKey,
    publicJwk: keys.publicJwk,
    signCryptoKey: keys.signCryptoKey,
  };
  const retiredLive = !keys.previousUntil || now < keys.previousUntil;
  if (!retiredLive) return [current];
  const all = [current, ...keys.previous];
  const signing = signingKeyAt(keys, now).kid;
  return [...all.filter((k) => k.kid === signing), ...all.filter((k) => k.kid !== signing)];
}

/** The public keys /auth/jwks publishes at `now` (none for HS*). */
export function publishedJwks(keys: JwtKeys, now: Date): JWK[] {
  return verifyingKeysAt(keys, now).flatMap((k) => (k.publicJwk ? [k.publicJwk] : []));
}

async function verifyingKey(
  publicKey: KeyObject,
  alg: JwtAlgorithm,
  privateKey?: KeyObject,
): Promise<VerifyingKey> {
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  return {
    kid,
    verifyCryptoKey: await importSPKI(publicKey.export({ format: 'pem', type: 'spki' }) as string, alg),
    publicJwk: { ...jwk, kid, alg, use: 'sig' },
    signCryptoKey: privateKey
      ? await importPKCS8(privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, alg)
      : undefined,
  };
}

/** A PEM private key for `alg`, newly generated (`gatehouse keys rotate`, the development key). */
export function generatePrivateKeyPem(alg: JwtAlgorithm): string {
  if (isHmac(alg)) throw new KeyError(`${alg} uses a shared secret, not a key pair`);
  return generatePem(alg).trim();
}

/** The RFC 7638 thumbprint (`kid`) of a PEM key, private or public. */
export async function kidOf(pem: string): Promise<string> {
  const key = /PRIVATE KEY/.test(pem) ? createPublicKey(createPrivateKey(pem)) : createPublicKey(pem);
  return calculateJwkThumbprint(await exportJWK(key));
}

/** Loads the current key and the retired ones; `now` dates a rotation seen for the first time. */
export async function loadJwtKeys(
  config: Config,
  opts: {
    now?: Date /** Do not record a rotation seen for the first time (`gatehouse keys list`). */;
    readOnly?: boolean;
  } = {},
): Promise<JwtKeys> {
  const now = opts.now ?? new Date();
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
      previous: [],
      previousSignsUntil: undefined,
      previousUntil: undefined,
    };
  }

  let privateKey: KeyObject;
  let source: string;
  const files = keyFiles(config);
  if (config.JWT_KEY) {
    privateKey = parsePrivate(config.JWT_KEY, alg, 'JWT_KEY');
    source = 'JWT_KEY';
  } else if (!files.generated || existsSync(files.key)) {
    privateKey = parsePrivate(readFileSync(files.key, 'utf8'), alg, files.key);
    source = files.generated ? `generated key in ${path.dirname(files.key)}` : files.key;
  } else {
    if (config.isProduction)
      throw new KeyError(
        `JWT_KEY (or ${path.join(config.CUSTOM_DIR, 'keys', 'private.pem')}) is required in production for ${alg}`,
      );
    const pem = devSecret(config, path.basename(files.key), () => generatePem(alg).trim());
    privateKey = parsePrivate(pem, alg, files.key);
    source = `generated key in ${path.dirname(files.key)}`;
  }
  const publicKey = createPublicKey(privateKey);
  const current = await verifyingKey(publicKey, alg, privateKey);

  // Retired keys: from the setting, else (keys from files) from the files `gatehouse keys rotate` writes.
  let previousText = config.JWT_PREVIOUS_KEY;
  let previousWhere = 'JWT_PREVIOUS_KEY';
  let rotatedAt: string | undefined = config.JWT_KEY_ROTATED_AT;
  if (!previousText && !config.JWT_KEY && existsSync(files.previous)) {
    previousText = readFileSync(files.previous, 'utf8');
    previousWhere = files.previous;
    if (!rotatedAt)
      rotatedAt = opts.readOnly
        ? existsSync(files.rotatedAt)
          ? readRotatedAt(files.rotatedAt)
          : undefined
        : recordRotation(files.rotatedAt, now);
  }
  const previous = previousText
    ? await Promise.all(
        parsePrevious(previousText, alg, previousWhere)
          .filter((k) => !k.public.equals(publicKey))
          .map((k) => verifyingKey(k.public, alg, k.private)),
      )
    : [];
  const at = rotatedAt && previous.length > 0 ? Date.parse(rotatedAt) : undefined;
  return {
    algorithm: alg,
    signingKey: privateKey,
    verifyKey: publicKey,
    signCryptoKey: current.signCryptoKey as CryptoKey,
    verifyCryptoKey: current.verifyCryptoKey,
    kid: current.kid,
    publicJwk: current.publicJwk,
    source,
    previous,
    previousSignsUntil: at === undefined ? undefined : new Date(at + config.JWKS_MAX_AGE * 1000),
    previousUntil:
      at === undefined
        ? undefined
        : new Date(at + config.JWKS_MAX_AGE * 1000 + config.JWT_EXPIRES_IN * 60_000),
  };
}

/**
 * The instant of a rotation made by `gatehouse keys rotate`: the first start that loads the rotated
 * files records it (`wx`, so instances starting together agree), since only from then on is the new key
 * published. Where the folder is read-only the rotation counts as immediate (undefined).
 */
function recordRotation(file: string, now: Date): string | undefined {
  if (existsSync(file)) return readRotatedAt(file);
  try {
    writeFileSync(file, `${now.toISOString()}\n`, { flag: 'wx', mode: 0o600 });
    return now.toISOString();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return readRotatedAt(file);
    if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM') return undefined;
    throw err;
  }
}

/** The instant in a `.rotated-at` file; a file that holds none stops the start. */
export function readRotatedAt(file: string): string {
  const text = readFileSync(file, 'utf8').trim();
  if (Number.isNaN(Date.parse(text))) throw new KeyError(`${file} does not hold an ISO 8601 instant`);
  return new Date(text).toISOString();
}
