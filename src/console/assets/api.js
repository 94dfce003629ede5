// The service's routes, called as any same-origin web client calls them. The session lives in the
// service's httpOnly cookies (`cookie: true` on sign-in): the refresh token is never visible to this
// page, and requests that change something carry the browser's `Origin`, which the CSRF check accepts.
// The access token of the last answer is kept in memory only, to show its claims.

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? `The service answered ${status}.`);
    this.status = status;
    this.code = body?.code;
  }
}

/** Calls `path` (with `headers` added); resolves with the parsed JSON answer (or undefined for an empty one). */
export async function api(method, path, body, headers = {}) {
  const init = { method, credentials: 'same-origin', headers: { ...headers, accept: 'application/json' } };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data;
  try {
    data = text === '' ? undefined : JSON.parse(text);
  } catch {
    data = { message: text.slice(0, 200) };
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

/** The payload of a JWT, decoded (not verified: the service verified it). */
export function decodeJwt(token) {
  const part = token.split('.')[1] ?? '';
  const b64 = part.replace(/-/g, '+').replace(/_/g, '/');
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

/** The signed-in state: undefined, or `{token, claims, user, expiresAt}`. */
let current;
const listeners = new Set();

export function session() {
  return current;
}

export function onSession(listener) {
  listeners.add(listener);
}

function setSession(body) {
  current = body?.jwt_token
    ? {
        token: body.jwt_token,
        claims: decodeJwt(body.jwt_token),
        user: body.user,
        expiresAt: Date.now() + body.jwt_expires_in,
      }
    : undefined;
  for (const l of listeners) l(current);
  return current;
}

/** Takes the answer of a sign-in: a session, or `{mfa, ticket}` (returned as is). */
export function signedIn(body) {
  if (body?.mfa) return body;
  setSession(body);
  return body;
}

/** A new access token from the refresh cookie; signed out when there is none (or it is spent). */
export async function refresh() {
  try {
    return setSession(await api('GET', '/auth/token/refresh'));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return setSession(undefined);
    throw err;
  }
}

/**
 * The session at page load. The refresh cookie is httpOnly, so the page asks the console whether the
 * browser holds one and refreshes only then: a signed-out load asks nothing that answers 401.
 */
export async function restore() {
  const { refreshCookie } = await api('GET', '/console/api/session');
  return refreshCookie ? refresh() : setSession(undefined);
}

/** The signed-in person as the console reads them: `{mfa, writable: [{folder, nested}]}`. */
export async function me() {
  await fresh();
  return api('GET', '/console/api/me');
}

/** Refreshes when the access token (and so its cookie, which storage requests carry) expires soon. */
export async function fresh() {
  if (current && current.expiresAt - Date.now() < 60_000) await refresh();
  return current;
}

export async function signOut(all = false) {
  try {
    await api('POST', '/auth/logout', { all });
  } finally {
    setSession(undefined);
  }
}

/** A storage path (`user/x/a b.png`) as a URL path, each segment percent-encoded. */
export function storagePath(prefix, key) {
  return `/storage/${prefix}/${key.split('/').map(encodeURIComponent).join('/')}`;
}
