// nhost-js-sdk 3 storage calls in Node: the SDK's storage client is axios 0.21, whose Node transport
// cannot send the FormData the SDK builds. This adapter sends every storage request with Node's own
// fetch (Node 18 or newer), which can. Install it once per client:
//
//   import { fetchAdapter } from './nhost-fetch-adapter.mjs';
//   nhost.storage.httpClient.defaults.adapter = fetchAdapter;
//
// docs/nhost-js-sdk.md explains it; test/ecosystem/nhost-sdk-storage.test.ts runs it against Gatehouse.

/** An axios (0.x) adapter over fetch. */
export async function fetchAdapter(config) {
  const base = config.baseURL ? config.baseURL.replace(/\/+$/, '') : '';
  const path = /^[a-z][a-z\d+.-]*:/i.test(config.url) ? config.url : `${base}/${config.url.replace(/^\/+/, '')}`;
  const url = new URL(path);
  for (const [k, v] of Object.entries(config.params ?? {})) url.searchParams.set(k, String(v));

  const headers = { ...config.headers };
  // fetch writes the multipart boundary itself; a bare "multipart/form-data" would lose it.
  if (config.data instanceof FormData) {
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'content-type') delete headers[name];
  }
  const res = await fetch(url, {
    method: (config.method ?? 'get').toUpperCase(),
    headers,
    body: config.data ?? undefined,
    credentials: config.withCredentials ? 'include' : 'same-origin',
    signal: config.timeout ? AbortSignal.timeout(config.timeout) : undefined,
  });
  const response = {
    // A string, parsed by axios as JSON when it is JSON (as for its own transports).
    data: await res.text(),
    status: res.status,
    statusText: res.statusText,
    headers: Object.fromEntries(res.headers),
    config,
    request: null,
  };
  if (!config.validateStatus || config.validateStatus(res.status)) return response;
  const error = new Error(`Request failed with status code ${res.status}`);
  Object.assign(error, { config, response, isAxiosError: true });
  throw error;
}
