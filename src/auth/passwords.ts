/**
 * Password hashing and checks. New hashes are argon2id (native, off the event loop) with the ARGON2_*
 * parameters; HBP's bcrypt hashes still verify and are replaced on the next successful login. Unknown
 * emails are checked against a dummy hash so that they take as long as wrong passwords.
 */
import { createHash } from 'node:crypto';
import { hash as argon2Hash, verify as argon2Verify, parseOptions } from '@node-rs/argon2';
import bcrypt from 'bcryptjs';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';

const ARGON2ID = 2; // Algorithm.Argon2id (a const enum, which isolated modules cannot import)

function argonOptions(config: Config) {
  return {
    algorithm: ARGON2ID,
    memoryCost: config.ARGON2_MEMORY_COST,
    timeCost: config.ARGON2_TIME_COST,
    parallelism: config.ARGON2_PARALLELISM,
  };
}

export function hashPassword(config: Config, password: string): Promise<string> {
  return argon2Hash(password, argonOptions(config));
}

const isBcrypt = (h: string) => /^\$2[aby]\$\d\d\$/.test(h);

/** True when a stored hash should be replaced: bcrypt, or argon2 with other parameters than configured. */
export function needsRehash(config: Config, stored: string): boolean {
  if (isBcrypt(stored)) return true;
  try {
    const o = parseOptions(stored);
    const want = argonOptions(config);
    return (
      Number(o.algorithm) !== ARGON2ID ||
      o.memoryCost !== want.memoryCost ||
      o.timeCost !== want.timeCost ||
      o.parallelism !== want.parallelism
    );
  } catch {
    return false;
  }
}

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    if (isBcrypt(stored)) return await bcrypt.compare(password, stored);
    return await argon2Verify(stored, password);
  } catch {
    // A malformed stored hash never matches.
    return false;
  }
}

const dummies = new WeakMap<Config, Promise<string>>();

/**
 * Spends the same time as checking a real password, for a caller whose email matched no account, and
 * always fails. The dummy hash uses the configured parameters, so the cost matches.
 */
export async function verifyDummy(config: Config, password: string): Promise<false> {
  let dummy = dummies.get(config);
  if (!dummy) {
    dummy = hashPassword(config, 'gatehouse-dummy-password-for-timing');
    dummies.set(config, dummy);
  }
  await argon2Verify(await dummy, password).catch(() => false);
  return false;
}

/**
 * Pwned Passwords check by k-anonymity: only the first 5 hex digits of the SHA-1 leave the process.
 * Throws PASSWORD_TOO_WEAK when the password appears in a breach. When the service cannot be reached,
 * HIBP_FAIL_OPEN decides: accept, or refuse with PASSWORD_CHECK_UNAVAILABLE (503).
 */
export async function checkBreached(config: Config, password: string): Promise<void> {
  if (!config.HIBP_ENABLED) return;
  const sha1 = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase();
  const prefix = sha1.slice(0, 5);
  const suffix = sha1.slice(5);
  let body: string;
  try {
    const base = config.HIBP_ENDPOINT.endsWith('/') ? config.HIBP_ENDPOINT : `${config.HIBP_ENDPOINT}/`;
    const res = await fetch(`${base}${prefix}`, {
      signal: AbortSignal.timeout(config.HIBP_TIMEOUT_MS),
      // Padding makes every answer about the same size, so its length says nothing about the prefix.
      headers: { 'Add-Padding': 'true', 'User-Agent': 'gatehouse' },
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    body = await res.text();
  } catch (err) {
    if (config.HIBP_FAIL_OPEN) return;
    throw new AppError('PASSWORD_CHECK_UNAVAILABLE', undefined, { cause: err });
  }
  for (const line of body.split('\n')) {
    const [hashSuffix, count] = line.trim().split(':');
    if (hashSuffix?.toUpperCase() === suffix && Number(count) > 0) throw new AppError('PASSWORD_TOO_WEAK');
  }
}
