/**
 * Test-side helpers for MFA suites: an authenticator written independently of the service's TOTP code
 * (its own base32 decoder and HOTP on node:crypto), so that a shared bug cannot make both sides agree.
 */
import { createHmac } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { accessToken, createAccount as createTestAccount } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function fromBase32(s: string): Buffer {
  let bits = '';
  for (const c of s.toUpperCase()) {
    const i = ALPHABET.indexOf(c);
    if (i < 0) throw new Error(`bad base32 character ${c}`);
    bits += i.toString(2).padStart(5, '0');
  }
  const bytes: number[] = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) bytes.push(Number.parseInt(bits.slice(i, i + 8), 2));
  return Buffer.from(bytes);
}

/** The 6-digit code an authenticator shows for `base32Secret` at `timeMs` (plus `stepOffset` steps). */
export function authenticatorCode(base32Secret: string, timeMs: number, stepOffset = 0): string {
  const counter = Math.floor(timeMs / 30_000) + stepOffset;
  const msg = Buffer.alloc(8);
  msg.writeUInt32BE(Math.floor(counter / 2 ** 32), 0);
  msg.writeUInt32BE(counter % 2 ** 32, 4);
  const mac = createHmac('sha1', fromBase32(base32Secret)).update(msg).digest();
  const o = (mac.at(-1) as number) & 0xf;
  const n =
    (((mac[o] as number) & 0x7f) << 24) |
    ((mac[o + 1] as number) << 16) |
    ((mac[o + 2] as number) << 8) |
    (mac[o + 3] as number);
  return String(n % 1_000_000).padStart(6, '0');
}

/** A code that is wrong for every step in the ±1 window. */
export function wrongCode(base32Secret: string, timeMs: number): string {
  const valid = new Set([-1, 0, 1].map((d) => authenticatorCode(base32Secret, timeMs, d)));
  for (let i = 0; ; i++) {
    const c = String(i).padStart(6, '0');
    if (!valid.has(c)) return c;
  }
}

export interface TestAccount {
  userId: string;
  accountId: string;
  email: string;
  token: string;
}

/** An active account made in the database, and an access token for it (signed in now). */
export async function createAccount(t: TestApp, email: string): Promise<TestAccount> {
  const { accountId, userId } = await createTestAccount(t, { email });
  return { userId, accountId, email, token: await accessToken(t, userId) };
}

export { accessToken } from '../helpers/accounts.ts';

export function post(
  t: TestApp,
  url: string,
  body: unknown,
  token?: string,
): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'POST',
    url,
    headers: token ? { authorization: `Bearer ${token}` } : {},
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
}

/** Runs generate then enable for an account; returns the base32 secret now active. */
export async function enableFor(t: TestApp, account: TestAccount): Promise<string> {
  const gen = await post(t, '/auth/mfa/generate', undefined, account.token);
  if (gen.statusCode !== 200) throw new Error(`generate failed: ${gen.statusCode} ${gen.body}`);
  const secret = gen.json().otp_secret as string;
  const res = await post(
    t,
    '/auth/mfa/enable',
    { code: authenticatorCode(secret, t.clock.now().getTime()) },
    account.token,
  );
  if (res.statusCode !== 204) throw new Error(`enable failed: ${res.statusCode} ${res.body}`);
  return secret;
}
