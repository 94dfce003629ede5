/** Form bodies of the OAuth endpoints: repeated keys (RFC 8707's `resource`) become arrays. */
import type { FastifyInstance } from 'fastify';

export function parseForm(text: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(text)) {
    const had = out[k];
    out[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

export function acceptForms(app: FastifyInstance): void {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 64 * 1024 },
    (_req, body, done) => done(null, parseForm(body as string)),
  );
}

/** One value of a parameter that must appear at most once; an array means it was repeated. */
export function single(
  v: string | string[] | undefined,
  name: string,
  fail: (msg: string) => Error,
): string | undefined {
  if (Array.isArray(v)) throw fail(`${name} is repeated`);
  return v;
}

export const asArray = (v: string | string[] | undefined): string[] | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? v : [v];
