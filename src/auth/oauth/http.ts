/**
 * Requests to providers. Every one has a timeout (PROVIDER_REQUEST_TIMEOUT) and a size limit, and its
 * failures become one of three answers: the provider is unreachable or failing (503
 * PROVIDER_UNAVAILABLE, worth retrying), it refused (401 PROVIDER_DENIED), or it answered something that
 * is not what the protocol says (502 PROVIDER_RESPONSE_INVALID). Nothing a provider returns, and no
 * token or secret sent to it, is put in an error message.
 */
import { AppError } from '../../errors.ts';

/** Largest provider answer read (discovery documents, key sets, token responses, profiles). */
const MAX_BODY = 256 * 1024;

export interface ProviderHttp {
  /** Timeout of each request, in milliseconds. */
  readonly timeoutMs: number;
}

export function unavailable(what: string, cause?: unknown): AppError {
  return new AppError(
    'PROVIDER_UNAVAILABLE',
    `The sign-in provider could not be reached (${what}); try again.`,
    {
      headers: { 'retry-after': '30' },
      cause,
    },
  );
}

export function invalidResponse(what: string): AppError {
  return new AppError('PROVIDER_RESPONSE_INVALID', `The sign-in provider answered an invalid ${what}.`);
}

export interface ProviderResponse {
  status: number;
  contentType: string;
  text: string;
}

/** One request to a provider; network failures, timeouts and 5xx answers are PROVIDER_UNAVAILABLE. */
export async function providerRequest(
  http: ProviderHttp,
  what: string,
  url: string,
  init: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string } = {},
): Promise<ProviderResponse> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: init.method ?? 'GET',
      headers: { 'user-agent': 'Gatehouse', ...init.headers },
      body: init.body,
      redirect: 'error',
      signal: AbortSignal.timeout(http.timeoutMs),
    });
  } catch (err) {
    throw unavailable(what, err);
  }
  const text = await readLimited(res, what);
  if (res.status >= 500) throw unavailable(`${what}: status ${res.status}`);
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text };
}

async function readLimited(res: Response, what: string): Promise<string> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_BODY) throw invalidResponse(`${what} (larger than ${MAX_BODY} bytes)`);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw unavailable(what, err);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The JSON object of a response; PROVIDER_RESPONSE_INVALID when it is not one. */
export function jsonObject(res: ProviderResponse, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(res.text);
  } catch {
    throw invalidResponse(what);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidResponse(what);
  return value as Record<string, unknown>;
}

/** A JSON object, or (GitHub, OAuth 1.0a) a form-encoded body, as string fields. */
export function fieldsOf(res: ProviderResponse, what: string): Record<string, unknown> {
  const t = res.text.trim();
  if (t.startsWith('{')) return jsonObject(res, what);
  return Object.fromEntries(new URLSearchParams(t));
}

/** A GET of a JSON resource with a bearer access token (profiles, userinfo, email lists). */
export async function getWithToken(
  http: ProviderHttp,
  what: string,
  url: string,
  accessToken: string,
  extraHeaders: Record<string, string> = {},
): Promise<ProviderResponse> {
  const res = await providerRequest(http, what, url, {
    headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json', ...extraHeaders },
  });
  if (res.status === 401 || res.status === 403)
    throw new AppError('PROVIDER_DENIED', `The sign-in provider refused to share the ${what}.`);
  if (res.status !== 200) throw invalidResponse(`${what} (status ${res.status})`);
  return res;
}
