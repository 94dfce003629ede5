/**
 * The new-device notice: a sign-in from a device the account has not used in the last 90 days emails the
 * owner (NOTIFY_NEW_SIGN_IN, when emails are on), so a stolen password used elsewhere does not go unseen.
 * A device is the browser family (browser and operating system, not the version, which changes with every
 * update) and the network prefix (/24 for IPv4, /48 for IPv6: a home or office network, not the address a
 * provider reassigns). The devices seen are the account's sign-in events and sessions of the last 90 days.
 * The very first sign-in of an account has nothing to compare with and sends nothing. The email says
 * when, from what and how, and has no link that signs in (only the application's home).
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { Queryable } from '../db/database.ts';
import type { EventClient } from '../events/types.ts';
import { appHome } from '../mail/links.ts';
import type { MailPort } from '../mail/port.ts';
import { type AccountProfile, accountLocale } from './accounts-store.ts';
import type { SessionDeps } from './deps.ts';

/** How far back a device counts as known. */
export const KNOWN_DEVICE_DAYS = 90;

/** Recognised browsers, most specific first (Edge and Opera also say Chrome; Chrome also says Safari). */
const BROWSERS: readonly [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\//, 'Edge'],
  [/\bOPR\/|\bOpera\b/, 'Opera'],
  [/\bSamsungBrowser\//, 'Samsung Internet'],
  [/\bFirefox\/|\bFxiOS\//, 'Firefox'],
  [/\bChrome\/|\bCriOS\/|\bChromium\//, 'Chrome'],
  [/\bSafari\//, 'Safari'],
];
const SYSTEMS: readonly [RegExp, string][] = [
  [/\bAndroid\b/, 'Android'],
  [/\biPhone\b|\biPad\b|\biPod\b/, 'iOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bLinux\b/, 'Linux'],
];

/**
 * The browser family of a User-Agent: "Firefox on Linux", or, for another client, its product name
 * ("curl", "okhttp"), or "unknown". Never more than a short, plain name: the header is the client's text.
 */
export function userAgentFamily(ua: string | null): string {
  if (!ua) return 'unknown';
  const browser = BROWSERS.find(([re]) => re.test(ua))?.[1];
  const system = SYSTEMS.find(([re]) => re.test(ua))?.[1];
  if (browser) return system ? `${browser} on ${system}` : browser;
  const product = /^([A-Za-z][A-Za-z0-9._-]{0,39})/.exec(ua)?.[1];
  return product ? (system ? `${product} on ${system}` : product) : 'unknown';
}

/** The network of an address: its /24 (IPv4) or /48 (IPv6); the address as is when it is neither. */
export function networkPrefix(ip: string | null): string {
  if (!ip) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  const v4 = mapped ?? ip;
  if (isIPv4(v4)) return `${v4.split('.').slice(0, 3).join('.')}.0/24`;
  if (isIPv6(ip)) return `${expandIPv6(ip).slice(0, 3).join(':')}::/48`;
  return ip;
}

/** The eight 16-bit groups of an IPv6 address, in lower-case hex without leading zeros. */
function expandIPv6(ip: string): string[] {
  const bare = ip.split('%')[0] ?? ip;
  const [head = '', tail] = bare.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  // An embedded IPv4 tail (::1.2.3.4) counts as two groups.
  const groups = (parts: string[]) =>
    parts.flatMap((p) =>
      isIPv4(p)
        ? (() => {
            const [a = 0, b = 0, c = 0, d = 0] = p.split('.').map(Number);
            return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
          })()
        : [p],
    );
  const l = groups(left);
  const r = groups(right);
  const fill = tail === undefined ? [] : Array<string>(Math.max(0, 8 - l.length - r.length)).fill('0');
  return [...l, ...fill, ...r].map((g) => Number.parseInt(g, 16).toString(16));
}

/** The device a client is, as the notice compares them. */
export function deviceKey(client: { ip: string | null; userAgent: string | null }): string {
  return `${userAgentFamily(client.userAgent)}|${networkPrefix(client.ip)}`;
}

/**
 * Whether the account signed in from this very client (same address, same user agent as stored, clipped
 * to 512 characters) in the window: one indexed probe that answers the common case, the same device
 * again, without reading the account's history (an account that signs in often has hundreds of rows).
 */
async function seenSameClient(
  db: Queryable,
  accountId: string,
  sessionId: string,
  since: Date,
  client: EventClient,
): Promise<boolean> {
  const ua = client.userAgent === null ? null : client.userAgent.slice(0, 512);
  const { rows } = await db.query(
    'SeenSameSignInClient',
    `SELECT 1 FROM auth.sessions
      WHERE account_id = $1 AND id <> $2 AND created_at >= $3
        AND ip IS NOT DISTINCT FROM $4 AND user_agent IS NOT DISTINCT FROM $5
     UNION ALL
     SELECT 1 FROM auth.security_events
      WHERE account_id = $1 AND type = 'sign_in' AND session_id IS DISTINCT FROM $2 AND created_at >= $3
        AND ip IS NOT DISTINCT FROM $4 AND user_agent IS NOT DISTINCT FROM $5
     LIMIT 1`,
    [accountId, sessionId, since, client.ip, ua],
  );
  return rows.length > 0;
}

/** The clients the account signed in from in the window (sign-in events and sessions), but `sessionId`. */
async function recentClients(
  db: Queryable,
  accountId: string,
  sessionId: string,
  since: Date,
): Promise<{ ip: string | null; user_agent: string | null; recent: boolean }[]> {
  const { rows } = await db.query<{ ip: string | null; user_agent: string | null; recent: boolean }>(
    'RecentSignInClients',
    `(SELECT ip, user_agent, created_at >= $3 AS recent FROM auth.security_events
       WHERE account_id = $1 AND type = 'sign_in' AND session_id IS DISTINCT FROM $2
       ORDER BY created_at DESC LIMIT 200)
     UNION ALL
     (SELECT ip, user_agent, created_at >= $3 AS recent FROM auth.sessions
       WHERE account_id = $1 AND id <> $2
       ORDER BY created_at DESC LIMIT 200)`,
    [accountId, sessionId, since],
  );
  return rows;
}

/**
 * Whether no new-device notice can be due for this sign-in: notices are off (or nothing sends email),
 * the account has no address, the client is unknown, or this very client signed in within the window
 * (one indexed probe). False: the full comparison (noticeNewDevice) decides.
 */
export async function noNoticeDue(
  deps: SessionDeps & { readonly mailer?: MailPort },
  db: Queryable,
  input: { profile: AccountProfile; sessionId: string; client: EventClient | null },
): Promise<boolean> {
  const { profile, client } = input;
  if (!deps.config.NOTIFY_NEW_SIGN_IN || !deps.mailer?.sends || !profile.account.email || !client)
    return true;
  const since = new Date(deps.clock.now().getTime() - KNOWN_DEVICE_DAYS * 86_400_000);
  return seenSameClient(db, profile.account.id, input.sessionId, since, client);
}

/**
 * Emails the owner when this sign-in (session `sessionId`, from `client`) comes from a device not seen
 * on the account in the last KNOWN_DEVICE_DAYS. Runs in the sign-in's transaction: the email is queued
 * in the outbox and goes out only if the sign-in commits.
 */
export async function noticeNewDevice(
  deps: SessionDeps & { readonly mailer?: MailPort },
  tx: Queryable,
  input: { profile: AccountProfile; sessionId: string; client: EventClient | null; method: string },
): Promise<boolean> {
  const { profile, client } = input;
  const email = profile.account.email;
  const mailer = deps.mailer;
  if (!mailer || !email || !client || (await noNoticeDue(deps, tx, input))) return false;
  const now = deps.clock.now();
  const since = new Date(now.getTime() - KNOWN_DEVICE_DAYS * 86_400_000);
  const seen = await recentClients(tx, profile.account.id, input.sessionId, since);
  // The account's very first sign-in: no device to compare with, nothing to tell.
  if (seen.length === 0) return false;
  const key = deviceKey(client);
  if (seen.some((c) => c.recent && deviceKey({ ip: c.ip, userAgent: c.user_agent }) === key)) return false;
  await mailer.send(tx, {
    to: email,
    template: 'new-sign-in',
    locals: {
      display_name: profile.user.display_name ?? email,
      email,
      url: deps.config.SERVER_URL,
      // The application's home, never a link that signs in or carries a secret.
      link: appHome(deps.config),
      device: userAgentFamily(client.userAgent),
      network: networkPrefix(client.ip),
      sign_in_method: input.method,
      time: now.toISOString(),
      locale: await accountLocale(tx, profile.account.id),
    },
  });
  return true;
}
