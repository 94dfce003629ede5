/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226 HOTP) and RFC 4648 base32, on node:crypto.
 * Authenticator apps only agree on SHA-1, 6 digits and 30-second steps, so those are the defaults.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { secretsEqual } from '../../constant-time.ts';

export type TotpAlgorithm = 'sha1' | 'sha256' | 'sha512';

export interface TotpParams {
  algorithm: TotpAlgorithm;
  digits: number;
  /** Step length in seconds (RFC 6238 "X"). */
  period: number;
}

export const TOTP_DEFAULTS: TotpParams = { algorithm: 'sha1', digits: 6, period: 30 };

/** RFC 4226 recommends 160-bit shared secrets (HBP used 80). */
export const SECRET_BYTES = 20;

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 without padding, as authenticator apps expect in otpauth URIs. */
export function base32Encode(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

/** Decodes base32 (case-insensitive, padding and spaces ignored); throws on any other character. */
export function base32Decode(text: string): Buffer {
  const clean = text.replace(/[\s=]/g, '').toUpperCase();
  const out: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const ch of clean) {
    const v = BASE32.indexOf(ch);
    if (v < 0) throw new Error('not a base32 string');
    buffer = (buffer << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((buffer >>> (bits - 8)) & 255);
      bits -= 8;
    }
    buffer &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}

/** A fresh random shared secret. */
export function generateSecret(): Buffer {
  return randomBytes(SECRET_BYTES);
}

/** RFC 4226 HOTP value for `counter`, zero-padded to `digits`. */
export function hotp(
  key: Uint8Array,
  counter: number,
  digits = TOTP_DEFAULTS.digits,
  algorithm = TOTP_DEFAULTS.algorithm,
): string {
  if (!Number.isSafeInteger(counter) || counter < 0) throw new RangeError('counter out of range');
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac(algorithm, key).update(msg).digest();
  // Dynamic truncation (RFC 4226 §5.3).
  const offset = (mac[mac.length - 1] as number) & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The RFC 6238 time step that contains `timeMs` (T0 = 0). */
export function timeStep(timeMs: number, period = TOTP_DEFAULTS.period): number {
  return Math.floor(timeMs / 1000 / period);
}

/** The code valid at `timeMs`. */
export function totp(key: Uint8Array, timeMs: number, params: TotpParams = TOTP_DEFAULTS): string {
  return hotp(key, timeStep(timeMs, params.period), params.digits, params.algorithm);
}

export interface VerifyOptions {
  /** Steps of clock drift accepted each way (RFC 6238 §5.2 recommends at most one). */
  window?: number;
  /** The last step accepted for this secret: that step and earlier ones are refused (replay protection). */
  lastUsedStep?: number | null;
  params?: TotpParams;
}

/**
 * The step whose code equals `code` within the drift window, or null. Every candidate is computed and
 * compared in constant time, so the answer's timing says nothing about which step (if any) matched.
 * Steps at or before `lastUsedStep` never match: a code accepted once cannot be replayed.
 */
export function verifyTotp(
  key: Uint8Array,
  code: string,
  timeMs: number,
  opts: VerifyOptions = {},
): number | null {
  const params = opts.params ?? TOTP_DEFAULTS;
  const window = opts.window ?? 1;
  const now = timeStep(timeMs, params.period);
  let matched: number | null = null;
  for (let step = now - window; step <= now + window; step++) {
    if (step < 0) continue;
    const ok = secretsEqual(hotp(key, step, params.digits, params.algorithm), code);
    const fresh = opts.lastUsedStep == null || step > opts.lastUsedStep;
    if (ok && fresh && matched === null) matched = step;
  }
  return matched;
}

/**
 * The `otpauth://` key URI that authenticator apps scan (Google Authenticator's Key Uri Format): the label
 * is `issuer:account`, and the issuer is repeated as a parameter for apps that read only that.
 */
export function otpauthUri(opts: {
  issuer: string;
  account: string;
  secret: string;
  params?: TotpParams;
}): string {
  const p = opts.params ?? TOTP_DEFAULTS;
  const label = `${encodeURIComponent(opts.issuer)}:${encodeURIComponent(opts.account)}`;
  const query = [
    `secret=${opts.secret}`,
    `issuer=${encodeURIComponent(opts.issuer)}`,
    `algorithm=${p.algorithm.toUpperCase()}`,
    `digits=${p.digits}`,
    `period=${p.period}`,
  ].join('&');
  return `otpauth://totp/${label}?${query}`;
}
