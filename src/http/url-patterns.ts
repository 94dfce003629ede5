/**
 * The URL patterns of ALLOWED_REDIRECT_URLS and CORS_ORIGINS, and the one matcher that redirects, CORS
 * and the CSRF check share. A pattern and a candidate are compared component by component, never as
 * strings: a `*` matched against the whole string let `https://*.example.com/*` accept
 * `https://evil.com/.example.com/steal`, the star running across the `/`. The candidate is parsed as a
 * browser parses it (WHATWG URL) before anything is compared, so a backslash, an encoded slash, upper
 * case or a Unicode host is judged on the URL the browser will really visit.
 *
 * - Scheme: `http` or `https`, exactly as written. Other schemes and user info never match.
 * - Host: a `*` label stands for one or more whole labels (`*.example.com` matches `a.example.com` and
 *   `a.b.example.com`, not `example.com`); a `*` inside a label (`pr-*.example.com`) for a run of label
 *   characters within that label. Label characters are `a-z`, `0-9` and `-` only: a `*` never stands for
 *   `/`, `?`, `#`, `@`, `:` or `\`. The last two labels are written out (no `*`), so no pattern covers a
 *   whole top-level domain. Unicode names are compared in punycode; a
 *   trailing dot never matches.
 * - Port: none is the scheme's default; `*` is any port, the default included.
 * - Path: none (or `/`) allows any path; otherwise it is compared with the candidate's path only, `*`
 *   standing for any run of path characters, case-insensitively. The query and fragment are not compared.
 */
import { domainToASCII } from 'node:url';

export interface UrlPattern {
  readonly protocol: 'http:' | 'https:';
  /** Tested against the candidate's WHATWG `hostname` (lower-case, punycode, IPv6 in brackets). */
  readonly host: RegExp;
  /** `''` for the scheme's default, `*` for any, else the port's digits. */
  readonly port: string;
  /** Tested against the candidate's `pathname`; undefined: any path. */
  readonly path: RegExp | undefined;
}

/** scheme :// host [: port] [path]; no user info, query, fragment or backslash in a pattern. */
const ENTRY = /^(https?):\/\/([^/?#@\\:[\]]+|\[[0-9a-f:.]+\])(?::(\d{1,5}|\*))?(\/[^?#\\]*)?$/i;
const LABEL = '[a-z0-9-]';
const DEFAULT_PORT = { 'http:': '80', 'https:': '443' } as const;

const literal = (s: string) => s.replace(/[.+?^${}()|[\]\\/*]/g, '\\$&');

/** The host part of a pattern as an anchored expression, or a reason it is not one. */
function hostPattern(protocol: string, raw: string): RegExp | string {
  if (!raw.includes('*')) {
    try {
      // The URL parser's own normalisation (case, punycode, IPv4 forms), as for the candidate.
      const hostname = new URL(`${protocol}//${raw}`).hostname;
      if (hostname === '' || hostname.endsWith('.')) return 'no host name';
      return new RegExp(`^${literal(hostname)}$`);
    } catch {
      return 'not a host name';
    }
  }
  const ascii = domainToASCII(raw.toLowerCase());
  const labels = ascii.split('.');
  if (ascii === '' || labels.some((l) => !/^[a-z0-9*-]+$/.test(l))) return 'not a host name';
  if (labels.length < 3 || labels.slice(-2).some((l) => l.includes('*')))
    return 'a `*` may stand only below a written-out domain, such as *.example.com';
  const parts = labels.map((l) =>
    l === '*' ? `${LABEL}+(?:\\.${LABEL}+)*` : l.split('*').map(literal).join(`${LABEL}*`),
  );
  return new RegExp(`^${parts.join('\\.')}$`);
}

/** Parses one entry; a string is the reason it is not a pattern. */
export function parseUrlPattern(entry: string): UrlPattern | string {
  const m = ENTRY.exec(entry.trim());
  if (!m) return 'not an http(s) URL pattern';
  const [, scheme = '', rawHost = '', rawPort, rawPath] = m;
  const protocol = scheme.toLowerCase() === 'https' ? 'https:' : 'http:';
  const host = hostPattern(protocol, rawHost);
  if (typeof host === 'string') return host;
  let port = '';
  if (rawPort === '*') port = '*';
  else if (rawPort !== undefined) {
    const n = Number(rawPort);
    if (n > 65535) return 'not a port';
    port = String(n) === DEFAULT_PORT[protocol] ? '' : String(n);
  }
  let path: RegExp | undefined;
  if (rawPath !== undefined && rawPath !== '/') {
    // Percent-encoding and dot segments as the URL parser applies them to the candidate's path.
    const normal = new URL(`${protocol}//h${rawPath}`).pathname;
    path = new RegExp(`^${normal.split('*').map(literal).join('.*')}$`, 'i');
  }
  return { protocol, host, port, path };
}

function patternsOf(entries: readonly string[]): UrlPattern[] {
  // Config refuses entries that are not patterns; one that got here anyway matches nothing.
  return entries.map(parseUrlPattern).filter((p): p is UrlPattern => typeof p !== 'string');
}

function parsed(candidate: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(candidate);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  // Credentials in a URL are a phishing trick (`https://good.example.com@evil.com`), never a need.
  if (url.username !== '' || url.password !== '') return undefined;
  return url;
}

const originMatches = (p: UrlPattern, url: URL) =>
  url.protocol === p.protocol && (p.port === '*' || p.port === url.port) && p.host.test(url.hostname);

/** Whether an absolute URL (a `redirect_to`) matches one of `entries`: scheme, host, port and path. */
export function urlMatcher(entries: readonly string[]): (candidate: string) => boolean {
  const patterns = patternsOf(entries);
  return (candidate) => {
    const url = parsed(candidate);
    return (
      url !== undefined &&
      patterns.some((p) => originMatches(p, url) && (p.path === undefined || p.path.test(url.pathname)))
    );
  };
}

/**
 * Whether an origin (an `Origin` header: `scheme://host[:port]` as browsers serialise it) matches one of
 * `entries`, whose paths are not looked at. Anything but a serialised origin is refused.
 */
export function originMatcher(entries: readonly string[]): (origin: string) => boolean {
  const patterns = patternsOf(entries);
  return (origin) => {
    const url = parsed(origin);
    return url !== undefined && url.origin === origin && patterns.some((p) => originMatches(p, url));
  };
}
