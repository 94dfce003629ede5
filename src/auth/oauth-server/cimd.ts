/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP authorization
 * spec's main way for a client to name itself): a `client_id` that is an https URL is fetched, and the
 * JSON there is the client's metadata. The fetch is made on behalf of whoever sent the authorization
 * request, so it is fenced in: a timeout, a size cap, no redirects, and an address guard applied to the
 * address actually connected to (the lookup is checked and then pinned, so a name that resolves to a
 * public address when checked and to 127.0.0.1 when connecting cannot reach the server's own network).
 * Loopback and private addresses (and http://127.0.0.1 / localhost URLs) are accepted only with
 * OAUTH_CIMD_ALLOW_PRIVATE, which development sets. Documents are cached as their Cache-Control allows.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';

const TIMEOUT_MS = 5_000;
const MAX_BYTES = 64 * 1024;
const MAX_CACHE_S = 24 * 3600;
const DEFAULT_CACHE_S = 300;
const MAX_ENTRIES = 1_000;

export interface MetadataDocument {
  client_id: string;
  client_name?: string;
  redirect_uris: string[];
  logo_uri?: string;
  client_uri?: string;
}

export class CimdError extends Error {}

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an address is loopback, private, link-local or otherwise not on the public internet. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return blocked.check(mapped[1] as string, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

/** Whether `clientId` is of the form that names a metadata document (an https URL, or http on loopback). */
export function isDocumentClientId(clientId: string): boolean {
  return clientId.startsWith('https://') || clientId.startsWith('http://');
}

function checkUrl(clientId: string, allowPrivate: boolean): URL {
  let u: URL;
  try {
    u = new URL(clientId);
  } catch {
    throw new CimdError('the client_id is not a URL');
  }
  if (u.href !== clientId) throw new CimdError('the client_id URL is not in normal form');
  if (u.hash || u.username || u.password)
    throw new CimdError('the client_id URL has a fragment or credentials');
  if (u.pathname === '/' || u.pathname === '') throw new CimdError('the client_id URL must have a path');
  const loopbackHost = u.hostname === '127.0.0.1' || u.hostname === 'localhost' || u.hostname === '[::1]';
  if (u.protocol === 'http:' && !(allowPrivate && loopbackHost))
    throw new CimdError('the client_id URL must be https');
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw new CimdError('the client_id URL must be https');
  return u;
}

/** A lookup that refuses private addresses (unless allowed) and connects to the address it checked. */
function guardedLookup(allowPrivate: boolean) {
  return (
    hostname: string,
    options: object,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    dnsLookup(hostname, { all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      // Every address the name has must be public: a name with one public and one private address
      // would otherwise reach the private one on a retry.
      if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) {
        const e = new CimdError('the client_id URL resolves to a private or loopback address') as Error &
          NodeJS.ErrnoException;
        return callback(e, '', 4);
      }
      const first = addresses[0];
      if (!first) return callback(new Error('no address') as NodeJS.ErrnoException, '', 4);
      if ((options as { all?: boolean }).all) return callback(null, [first]);
      callback(null, first.address, first.family);
    });
  };
}

interface Fetched {
  body: string;
  maxAgeS: number;
}

function fetchDocument(u: URL, allowPrivate: boolean): Promise<Fetched> {
  // A literal address skips the lookup: check it here.
  const literal = u.hostname.replace(/^\[|\]$/g, '');
  if (isIP(literal) && !allowPrivate && isPrivateAddress(literal))
    return Promise.reject(new CimdError('the client_id URL points at a private or loopback address'));
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.get(
      u,
      {
        lookup: guardedLookup(allowPrivate) as never,
        headers: { accept: 'application/json', 'user-agent': 'Gatehouse (client metadata fetch)' },
        timeout: TIMEOUT_MS,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          // Redirects are not followed: the document must live at the URL that names the client.
          return reject(new CimdError(`the client metadata document answered HTTP ${res.statusCode}`));
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BYTES) {
            req.destroy();
            reject(new CimdError(`the client metadata document is larger than ${MAX_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () =>
          resolve({
            body: Buffer.concat(chunks).toString('utf8'),
            maxAgeS: cacheSeconds(res.headers['cache-control']),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => {
      req.destroy(new CimdError('the client metadata document did not arrive in time'));
    });
    req.on('error', (err) =>
      reject(
        err instanceof CimdError ? err : new CimdError('the client metadata document could not be fetched'),
      ),
    );
  });
}

function cacheSeconds(header: string | undefined): number {
  if (!header) return DEFAULT_CACHE_S;
  if (/\b(no-store|no-cache)\b/i.test(header)) return 0;
  const m = /\bmax-age=(\d+)/i.exec(header);
  return m ? Math.min(Number(m[1]), MAX_CACHE_S) : DEFAULT_CACHE_S;
}

const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');

function parseDocument(clientId: string, text: string): MetadataDocument {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new CimdError('the client metadata document is not JSON');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new CimdError('the client metadata document is not a JSON object');
  // The document names itself: another URL's metadata served here would let one client pose as another.
  if (doc.client_id !== clientId)
    throw new CimdError('the client metadata document names another client_id than its URL');
  if (!isStringArray(doc.redirect_uris) || doc.redirect_uris.length === 0)
    throw new CimdError('the client metadata document has no redirect_uris');
  const method = doc.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none')
    throw new CimdError(
      'only public clients (token_endpoint_auth_method "none") may use a metadata document',
    );
  if ('client_secret' in doc) throw new CimdError('a client metadata document must not hold a client_secret');
  const out: MetadataDocument = { client_id: clientId, redirect_uris: doc.redirect_uris };
  if (typeof doc.client_name === 'string') out.client_name = doc.client_name.slice(0, 200);
  if (typeof doc.logo_uri === 'string') out.logo_uri = doc.logo_uri;
  if (typeof doc.client_uri === 'string') out.client_uri = doc.client_uri;
  return out;
}

/** Fetches and caches client metadata documents for one instance. */
export class MetadataDocuments {
  private readonly cache = new Map<string, { doc: MetadataDocument; until: number }>();

  constructor(
    private readonly allowPrivate: boolean,
    private readonly now: () => number,
  ) {}

  /** The document of `clientId`; throws CimdError when it cannot be used. */
  async get(clientId: string): Promise<MetadataDocument> {
    const hit = this.cache.get(clientId);
    if (hit && hit.until > this.now()) return hit.doc;
    const u = checkUrl(clientId, this.allowPrivate);
    const fetched = await fetchDocument(u, this.allowPrivate);
    const doc = parseDocument(clientId, fetched.body);
    if (fetched.maxAgeS > 0) {
      if (this.cache.size >= MAX_ENTRIES) {
        const oldest = this.cache.keys().next();
        if (!oldest.done) this.cache.delete(oldest.value);
      }
      this.cache.set(clientId, { doc, until: this.now() + fetched.maxAgeS * 1000 });
    }
    return doc;
  }
}
