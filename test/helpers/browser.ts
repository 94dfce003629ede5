/**
 * A small browser for provider sign-ins: a cookie jar per host (paths, expiry and deletion honoured),
 * redirects followed between this service (reached through `app.inject`, at SERVER_URL's origin) and
 * the protocol peers on 127.0.0.1, and a stop at any other origin (the app's success or failure URL),
 * whose address is returned. Apple's form_post page is submitted as a browser would.
 */
import type { FastifyInstance } from 'fastify';

interface Cookie {
  name: string;
  value: string;
  path: string;
  expires?: number;
}

export interface Page {
  status: number;
  url: string;
  /** Where the last redirect pointed (the app's URL when the browser stopped there). */
  location?: string;
  body: string;
  headers: Record<string, string | string[] | number | undefined>;
}

export interface Hop {
  method?: 'GET' | 'POST';
  /** A form body (application/x-www-form-urlencoded). */
  form?: Record<string, string>;
  /** Headers of the first request only (Authorization, Referer, Sec-Fetch-Site…). */
  headers?: Record<string, string>;
}

export class Browser {
  private readonly jar = new Map<string, Cookie[]>();
  /** Every URL requested, in order. */
  readonly visited: string[] = [];
  /** Fields added to auto-submitted form_post forms (Apple adds `user` on a first sign-in). */
  formExtras: Record<string, string> = {};

  constructor(
    private readonly app: FastifyInstance,
    private readonly serviceOrigin: string,
  ) {}

  private cookieHeader(url: URL): string | undefined {
    const now = Date.now();
    const list = (this.jar.get(url.host) ?? []).filter(
      (c) => (c.expires === undefined || c.expires > now) && url.pathname.startsWith(c.path),
    );
    return list.length ? list.map((c) => `${c.name}=${c.value}`).join('; ') : undefined;
  }

  private store(url: URL, setCookie: string[]): void {
    const list = this.jar.get(url.host) ?? [];
    for (const line of setCookie) {
      const [pair = '', ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      let path = '/';
      let expires: number | undefined;
      for (const a of attrs) {
        const [k = '', v = ''] = a.split('=');
        if (k.toLowerCase() === 'path') path = v;
        if (k.toLowerCase() === 'max-age') expires = Date.now() + Number(v) * 1000;
        if (k.toLowerCase() === 'expires' && expires === undefined) expires = Date.parse(v);
      }
      const i = list.findIndex((c) => c.name === name && c.path === path);
      if (i >= 0) list.splice(i, 1);
      if (expires === undefined || expires > Date.now()) list.push({ name, value, path, expires });
    }
    this.jar.set(url.host, list);
  }

  /** The value of a cookie this browser holds for the service. */
  cookie(name: string): string | undefined {
    return this.jar.get(new URL(this.serviceOrigin).host)?.find((c) => c.name === name)?.value;
  }

  /** Sets a cookie for the service (a session cookie copied from a sign-in answer, say). */
  setCookie(name: string, value: string, path = '/'): void {
    this.store(new URL(this.serviceOrigin), [`${name}=${value}; Path=${path}`]);
  }

  clearCookies(host?: string): void {
    if (host) this.jar.delete(host);
    else this.jar.clear();
  }

  private async request(url: URL, hop: Hop): Promise<Page> {
    this.visited.push(url.toString());
    const headers: Record<string, string> = { ...hop.headers };
    const cookie = this.cookieHeader(url);
    if (cookie) headers.cookie = cookie;
    const body = hop.form ? new URLSearchParams(hop.form).toString() : undefined;
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    if (url.origin === this.serviceOrigin) {
      const res = await this.app.inject({
        method: hop.method ?? 'GET',
        url: url.pathname + url.search,
        headers,
        ...(body === undefined ? {} : { payload: body }),
      });
      const set = res.headers['set-cookie'];
      this.store(url, set === undefined ? [] : Array.isArray(set) ? set : [String(set)]);
      return {
        status: res.statusCode,
        url: url.toString(),
        body: res.body,
        headers: res.headers,
        location: res.headers.location as string | undefined,
      };
    }
    const res = await fetch(url, { method: hop.method ?? 'GET', headers, body, redirect: 'manual' });
    this.store(url, res.headers.getSetCookie());
    const out: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      out[k] = v;
    });
    return {
      status: res.status,
      url: url.toString(),
      body: await res.text(),
      headers: out,
      location: res.headers.get('location') ?? undefined,
    };
  }

  /**
   * Opens `url` and follows redirects (and form_post pages) while they stay on the service or a peer
   * on 127.0.0.1; returns the last answer, whose `location` is where the browser stopped.
   */
  async go(start: string, hop: Hop = {}): Promise<Page> {
    let url = new URL(start);
    let current: Hop = hop;
    for (let i = 0; i < 20; i++) {
      const page = await this.request(url, current);
      const autoPost = page.status === 200 ? formPost(page.body, url) : undefined;
      if (autoPost) {
        url = autoPost.action;
        current = { method: 'POST', form: { ...autoPost.fields, ...this.formExtras } };
        if (!this.follows(url)) return { ...page, location: url.toString() };
        continue;
      }
      if (page.status < 300 || page.status >= 400 || !page.location) return page;
      const nextUrl = new URL(page.location, url);
      if (!this.follows(nextUrl)) return { ...page, location: nextUrl.toString() };
      url = nextUrl;
      current = { method: page.status === 307 || page.status === 308 ? current.method : 'GET' };
    }
    throw new Error('too many redirects');
  }

  private follows(url: URL): boolean {
    return url.origin === this.serviceOrigin || url.hostname === '127.0.0.1';
  }
}

/** The auto-submitting form of a `response_mode=form_post` page. */
function formPost(html: string, base: URL): { action: URL; fields: Record<string, string> } | undefined {
  const form = /<form[^>]*method="post"[^>]*action="([^"]+)"/i.exec(html);
  if (!form) return undefined;
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/gi)) {
    fields[m[1] as string] = decodeEntities(m[2] as string);
  }
  return { action: new URL(decodeEntities(form[1] as string), base), fields };
}

function decodeEntities(s: string): string {
  return s
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x27;|&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&#x2F;|&#47;/g, '/');
}
