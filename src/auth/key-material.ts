/**
 * Key material without the service around it: which key types an algorithm takes, parsing PEM keys
 * (current and retired), where key files live, and what is wrong with the key settings. config.ts checks
 * the settings with it, before anything opens the database; keys.ts builds the signing keys with it.
 * It imports nothing from config.ts (which imports it).
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const JWT_ALGORITHMS = [
  'HS256',
  'HS384',
  'HS512',
  'RS256',
  'RS384',
  'RS512',
  'ES256',
  'EdDSA',
] as const;
export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number];

export class KeyError extends Error {}

export const isHmac = (alg: JwtAlgorithm) => alg.startsWith('HS');

function expectedKeyType(alg: JwtAlgorithm): { type: string; curve?: string } {
  if (alg.startsWith('RS')) return { type: 'rsa' };
  if (alg === 'ES256') return { type: 'ec', curve: 'prime256v1' };
  return { type: 'ed25519' };
}

export function generatePem(alg: JwtAlgorithm): string {
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

export function parsePrivate(pem: string, alg: JwtAlgorithm, where: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem.replace(/\\n/g, '\n'));
  } catch {
    throw new KeyError(`${where} is not a valid PEM private key`);
  }
  checkType(key, alg, where);
  return key;
}

function checkType(key: KeyObject, alg: JwtAlgorithm, where: string): void {
  const want = expectedKeyType(alg);
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (key.asymmetricKeyType !== want.type || (want.curve && curve !== want.curve)) {
    throw new KeyError(
      `${where} holds a ${key.asymmetricKeyType}${curve ? ` ${curve}` : ''} key, which cannot sign ${alg}`,
    );
  }
}

/** The settings the key checks read. */
interface KeySettings {
  NODE_ENV: string;
  JWT_ALGORITHM: JwtAlgorithm;
  JWT_KEY: string;
  JWT_PREVIOUS_KEY: string;
  CUSTOM_DIR: string;
  DATA_DIR: string;
}

/** Where the signing key comes from when JWT_KEY is unset, and where its rotation files live. */
export interface KeyFiles {
  /** The private key file: HBP's CUSTOM_DIR/keys/private.pem when present, else the generated one. */
  key: string;
  /** The key(s) it replaced: `<stem>.previous.pem`. */
  previous: string;
  /** When it replaced them: `<stem>.rotated-at`, an ISO 8601 instant. */
  rotatedAt: string;
  generated: boolean;
}

export function keyFiles(c: Pick<KeySettings, 'JWT_ALGORITHM' | 'CUSTOM_DIR' | 'DATA_DIR'>): KeyFiles {
  const hbp = path.join(c.CUSTOM_DIR, 'keys', 'private.pem');
  const generated = !existsSync(hbp);
  const key = generated ? path.join(c.DATA_DIR, 'keys', `jwt-${c.JWT_ALGORITHM.toLowerCase()}.pem`) : hbp;
  const stem = key.slice(0, -'.pem'.length);
  return { key, previous: `${stem}.previous.pem`, rotatedAt: `${stem}.rotated-at`, generated };
}

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
    const problems: string[] = [];
    if (c.JWT_PREVIOUS_KEY)
      problems.push(
        `JWT_PREVIOUS_KEY needs an asymmetric JWT_ALGORITHM (RS*, ES256, EdDSA): a verifier holds one ${alg} secret, so a shared secret cannot be rotated without a cut`,
      );
    if (!c.JWT_KEY) {
      if (production)
        problems.push(
          `JWT_KEY is required in production for ${alg} (a shared secret of at least ${minBytes} bytes)`,
        );
    } else if (Buffer.byteLength(c.JWT_KEY) < minBytes)
      problems.push(`JWT_KEY must be at least ${minBytes} bytes long for ${alg}`);
    return problems;
  }
  const files = keyFiles(c);
  const problems: string[] = [];
  const check = (what: () => void, file?: string) => {
    try {
      what();
    } catch (err) {
      problems.push(
        err instanceof KeyError ? err.message : `${file} cannot be read: ${(err as Error).message}`,
      );
    }
  };
  if (c.JWT_KEY) check(() => parsePrivate(c.JWT_KEY, alg, 'JWT_KEY'));
  else if (!files.generated)
    check(() => parsePrivate(readFileSync(files.key, 'utf8'), alg, files.key), files.key);
  else if (production)
    problems.push(
      `JWT_KEY (a PEM private key) or the file ${path.join(c.CUSTOM_DIR, 'keys', 'private.pem')} is required in production for ${alg}; \`gatehouse keys generate\` makes one`,
    );
  if (c.JWT_PREVIOUS_KEY) check(() => parsePrevious(c.JWT_PREVIOUS_KEY, alg, 'JWT_PREVIOUS_KEY'));
  else if (!c.JWT_KEY && existsSync(files.previous))
    check(() => parsePrevious(readFileSync(files.previous, 'utf8'), alg, files.previous), files.previous);
  return problems;
}

/** The PEM blocks of a text holding one or more keys. */
function pemBlocks(text: string): string[] {
  return [...text.replace(/\\n/g, '\n').matchAll(/-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----/g)].map(
    (m) => m[0],
  );
}

/** Retired keys: private or public PEM blocks, each of the type `alg` needs; returned as public keys. */
export function parsePrevious(
  text: string,
  alg: JwtAlgorithm,
  where: string,
): { public: KeyObject; private?: KeyObject }[] {
  const blocks = pemBlocks(text);
  if (blocks.length === 0) throw new KeyError(`${where} holds no PEM key`);
  return blocks.map((pem, i) => {
    const name = blocks.length > 1 ? `${where} (key ${i + 1})` : where;
    if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) {
      const key = parsePrivate(pem, alg, name);
      return { public: createPublicKey(key), private: key };
    }
    let key: KeyObject;
    try {
      key = createPublicKey(pem);
    } catch {
      throw new KeyError(`${name} is not a valid PEM key`);
    }
    checkType(key, alg, name);
    return { public: key };
  });
}
