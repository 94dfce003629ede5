/**
 * Encryption of TOTP secrets at rest, so that a leaked database (or backup) does not leak second factors.
 *
 * Sealed format: `gh1:<keyid>:<iv>:<ciphertext>:<tag>` (base64url parts), AES-256-GCM with a random 96-bit
 * IV. The AES key is derived with HKDF-SHA256 from a server secret (MFA_ENCRYPTION_KEY); `keyid` is a
 * fingerprint of that derived key, so several secrets can be held at once and rotated: values sealed under
 * a retired secret (MFA_ENCRYPTION_PREVIOUS_KEYS) still open, and are re-sealed under the current one.
 * The caller's context (the account id) is authenticated as associated data: a sealed secret copied from
 * one account row to another does not open there.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { Config } from '../../config.ts';
import { devSecret } from '../keys.ts';

const VERSION = 'gh1';
const SALT = 'gatehouse/mfa-secret-box';
const INFO = 'aes-256-gcm v1';

export class SecretBoxError extends Error {}

interface Key {
  id: string;
  key: Buffer;
}

function deriveKey(secret: string): Key {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), SALT, INFO, 32));
  const id = createHash('sha256').update('key-id').update(key).digest('hex').slice(0, 12);
  return { id, key };
}

const b64 = (b: Buffer) => b.toString('base64url');

export class SecretBox {
  private readonly current: Key;
  private readonly keys: Map<string, Key>;

  /** `current` seals and opens; `previous` secrets only open. */
  constructor(current: string, previous: readonly string[] = []) {
    if (current.length < 16)
      throw new SecretBoxError('the MFA encryption secret must be at least 16 characters');
    this.current = deriveKey(current);
    this.keys = new Map([this.current, ...previous.map(deriveKey)].map((k) => [k.id, k]));
  }

  /** The box for a configuration; outside production a secret is generated once into DATA_DIR/keys. */
  static fromConfig(config: Config): SecretBox {
    // config.ts refuses production without MFA_ENCRYPTION_KEY when MFA is on.
    const secret =
      config.MFA_ENCRYPTION_KEY ||
      devSecret(config, 'mfa-encryption.secret', () => randomBytes(32).toString('base64url'));
    return new SecretBox(secret, config.MFA_ENCRYPTION_PREVIOUS_KEYS);
  }

  get currentKeyId(): string {
    return this.current.id;
  }

  /** True when values sealed under the key `id` open with this box (the current key or a previous one). */
  opensKey(id: string): boolean {
    return this.keys.has(id);
  }

  /** True when `value` is sealed under the current key (nothing to re-seal). */
  isCurrent(value: string): boolean {
    return value.startsWith(`${VERSION}:${this.current.id}:`);
  }

  static isSealed(value: string): boolean {
    return value.startsWith(`${VERSION}:`);
  }

  seal(plain: Uint8Array, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
    cipher.setAAD(Buffer.from(`${VERSION}:${this.current.id}:${context}`));
    const ct = Buffer.concat([cipher.update(plain), cipher.final()]);
    return [VERSION, this.current.id, b64(iv), b64(ct), b64(cipher.getAuthTag())].join(':');
  }

  /** Opens a sealed value; throws SecretBoxError when it is malformed, tampered, or its key is unknown. */
  open(sealed: string, context: string): Buffer {
    const parts = sealed.split(':');
    const [version, id, iv, ct, tag] = parts;
    if (parts.length !== 5 || version !== VERSION || !id || !iv || ct === undefined || !tag)
      throw new SecretBoxError('not a sealed value');
    const k = this.keys.get(id);
    if (!k) throw new SecretBoxError(`sealed under an unknown key (id ${id})`);
    try {
      // A fixed tag length: GCM would otherwise accept a truncated (forgeable) tag.
      const decipher = createDecipheriv('aes-256-gcm', k.key, Buffer.from(iv, 'base64url'), {
        authTagLength: 16,
      });
      decipher.setAAD(Buffer.from(`${VERSION}:${id}:${context}`));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]);
    } catch (err) {
      throw new SecretBoxError('the sealed value does not authenticate', { cause: err });
    }
  }
}
