/**
 * Limits on guessing credentials: a wrong password at login or as `old_password`, a wrong admin secret.
 *
 * - Per subject (an account, or the admin secret) and client address: RATE_LIMIT_LOGIN_ACCOUNT_MAX
 *   failures are free; after that each attempt must wait since the previous one, RATE_LIMIT_LOGIN_DELAY
 *   at first and twice as long each time, up to RATE_LIMIT_LOGIN_DELAY_MAX. The failures are forgotten
 *   after RATE_LIMIT_LOGIN_ACCOUNT_WINDOW of quiet, or at once by a right guess. The pair includes the
 *   address so that a stranger guessing elsewhere never slows down the owner (HBP-style per-account
 *   counters let anyone lock the owner out).
 * - Per client address, whatever the subject: RATE_LIMIT_IP_FAILURES_MAX failures per
 *   RATE_LIMIT_IP_FAILURES_WINDOW, so one address cannot try passwords across many accounts.
 *
 * An attempt is counted as a failure when it begins and refunded when it turns out right (or is not a
 * guess after all), so a burst of parallel attempts cannot slip past the counters before the first
 * answers, and an attempt that ends in an unexpected error stays counted.
 */
import { isIP } from 'node:net';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { type CounterStore, emailKey } from './counters.ts';

/** One credential check in progress. Unless told otherwise it stays counted as a failure. */
export interface Guess {
  /** The credential was right: forgets the subject's failures from this address and refunds this one. */
  succeeded(): Promise<void>;
  /** The attempt turned out not to test the credential (a busy hasher, a validation error): refunded. */
  abandon(): Promise<void>;
}

export interface GuessLimiter {
  /** Counts the start of a credential check by `subject` from `address`; 429 when over a limit. */
  begin(subject: string, address: string): Promise<Guess>;
  /**
   * For a check cheap enough to run on every request (the admin secret, which tools send with many
   * requests at once): 429 when over a limit, else runs `check` and counts a failure when it is false.
   * Nothing is counted while requests are in flight, so parallel right answers never trip the limit.
   */
  guard(subject: string, address: string, check: () => boolean): Promise<boolean>;
}

/** The subject of admin-secret guesses (there is one secret, whoever is impersonated). */
export const ADMIN_SECRET_SUBJECT = 'admin-secret';

/**
 * The subject of guesses at an account's password: its email as typed at login, whether or not it has an
 * account, so that login and the `password` of a sensitive change (auth/reauth.ts) share one budget.
 */
export const passwordSubject = (email: string) => `email:${emailKey(email)}`;

const NOTHING: Guess = { succeeded: async () => {}, abandon: async () => {} };

/**
 * The part of a client address that names one client: an IPv4 address whole, an IPv6 address by its
 * /64 (one subscriber's network, where every address is theirs to use).
 */
export function clientKey(ip: string): string {
  const address = ip.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1] as string;
  if (isIP(address) !== 6) return address;
  const [head = '', tail] = address.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined ? h : [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

function tooMany(resetInMs: number, message: string): AppError {
  return new AppError('RATE_LIMITED', message, {
    headers: { 'retry-after': String(Math.max(1, Math.ceil(resetInMs / 1000))) },
  });
}

export function makeGuessLimiter(
  store: CounterStore | undefined,
  config: Config,
  safely: <T>(what: () => Promise<T>) => Promise<T | undefined>,
): GuessLimiter {
  if (!store) return { begin: async () => NOTHING, guard: async (_s, _a, check) => check() };
  const free = config.RATE_LIMIT_LOGIN_ACCOUNT_MAX;
  // The wait after attempt `n` (counted since the last right guess) before the next one may begin: none
  // before the free failures are spent, then RATE_LIMIT_LOGIN_DELAY, doubling, up to the cap.
  const waitAfter = (n: number) =>
    Math.min(config.RATE_LIMIT_LOGIN_DELAY * 2 ** Math.min(n - free, 40), config.RATE_LIMIT_LOGIN_DELAY_MAX);
  const keys = (subject: string, address: string) => {
    const client = clientKey(address);
    return {
      ipKey: `guess:ip:${client}`,
      pairKey: `guess:pair:${subject}:${client}`,
      gateKey: `guess:wait:${subject}:${client}`,
    };
  };
  return {
    async guard(subject, address, check) {
      const { ipKey, pairKey, gateKey } = keys(subject, address);
      const [ip, gate] = await Promise.all([
        safely(() => store.peek(ipKey)),
        safely(() => store.peek(gateKey)),
      ]);
      if (ip && ip.count >= config.RATE_LIMIT_IP_FAILURES_MAX)
        throw tooMany(ip.resetInMs, 'Too many failed attempts from this address; try again later.');
      if (gate && gate.count > 0)
        throw tooMany(gate.resetInMs, 'Too many failed attempts; wait before trying again.');
      if (check()) return true;
      await safely(() => store.increment(ipKey, config.RATE_LIMIT_IP_FAILURES_WINDOW));
      const pair = await safely(() => store.increment(pairKey, config.RATE_LIMIT_LOGIN_ACCOUNT_WINDOW, true));
      if (pair && pair.count >= free) await safely(() => store.increment(gateKey, waitAfter(pair.count)));
      return false;
    },
    async begin(subject, address) {
      const { ipKey, pairKey, gateKey } = keys(subject, address);
      const ip = await safely(() => store.increment(ipKey, config.RATE_LIMIT_IP_FAILURES_WINDOW));
      if (ip && ip.count > config.RATE_LIMIT_IP_FAILURES_MAX) {
        await safely(() => store.release(ipKey));
        throw tooMany(ip.resetInMs, 'Too many failed attempts from this address; try again later.');
      }
      const pair = await safely(() => store.increment(pairKey, config.RATE_LIMIT_LOGIN_ACCOUNT_WINDOW, true));
      const n = pair?.count ?? 0;
      let gated = false;
      if (n >= free) {
        // From the last free attempt on, an attempt takes the gate and holds it for the wait after it;
        // whoever finds it held waits. One atomic increment, so parallel attempts cannot all pass.
        const gate = await safely(() => store.increment(gateKey, waitAfter(n)));
        gated = gate !== undefined;
        if (gate && gate.count > 1) {
          await safely(() => Promise.all([store.release(pairKey), store.release(ipKey)]));
          throw tooMany(gate.resetInMs, 'Too many failed attempts; wait before trying again.');
        }
      }
      let settled = false;
      const settle = async (what: () => Promise<unknown>) => {
        if (settled) return;
        settled = true;
        // A refund the store cannot take (Redis down, whatever the policy) must not fail the request
        // whose credential check is already done: the count stays, as for an unexpected error.
        await safely(what).catch(() => {});
      };
      return {
        succeeded: () =>
          settle(() =>
            Promise.all([
              store.reset(pairKey),
              store.release(ipKey),
              ...(gated ? [store.reset(gateKey)] : []),
            ]),
          ),
        abandon: () =>
          settle(() =>
            Promise.all([
              store.release(pairKey),
              store.release(ipKey),
              ...(gated ? [store.reset(gateKey)] : []),
            ]),
          ),
      };
    },
  };
}
