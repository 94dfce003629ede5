/**
 * nhost-js-sdk 3's storage calls from Node, as docs/nhost-js-sdk.md describes them: without help they
 * fail before sending anything (axios 0.21 in Node cannot send a FormData), and with the fetch adapter of
 * docs/examples/nhost-fetch-adapter.mjs they upload, read metadata and delete through Gatehouse.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import NhostClientModule from 'nhost-js-sdk/dist/NhostClient.js';
// @ts-expect-error a plain JavaScript example, documented rather than typed
import { fetchAdapter } from '../../docs/examples/nhost-fetch-adapter.mjs';
import { HS, newEmail } from '../auth/helpers.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

interface SdkClient {
  auth: {
    register(a: { email: string; password: string }): Promise<{ user: { id: string } }>;
    logout(): Promise<unknown>;
  };
  storage: {
    httpClient: { defaults: { adapter?: unknown } };
    putString(
      path: string,
      data: string,
      type?: string,
      metadata?: Record<string, string>,
    ): Promise<{
      key: string;
      ContentType: string;
      ContentLength: number;
    }>;
    getMetadata(path: string): Promise<{ key: string; Metadata: { token: string } }>;
    delete(path: string): Promise<unknown>;
  };
}
type SdkConstructor = new (config: Record<string, unknown>) => SdkClient;
const NhostClient = (NhostClientModule as unknown as { default: SdkConstructor }).default;

function memoryStorage() {
  const m = new Map<string, string>();
  return {
    getItem: (k: string) => m.get(k) ?? null,
    setItem: (k: string, v: string) => void m.set(k, v),
    removeItem: (k: string) => void m.delete(k),
  };
}

describe('nhost-js-sdk 3 storage from Node', () => {
  let t: TestApp;
  let baseURL: string;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, RATE_LIMIT_ENABLED: false });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseURL = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  after(() => t.close());

  const signedIn = async () => {
    const nhost = new NhostClient({
      baseURL,
      ssr: false,
      autoLogin: false,
      clientStorage: memoryStorage(),
      clientStorageType: 'web',
    });
    const { user } = await nhost.auth.register({ email: newEmail('sdk-storage'), password: 'sdk password' });
    return { nhost, userId: user.id };
  };

  it('cannot upload without help: axios in Node refuses the FormData the SDK builds', async () => {
    const { nhost, userId } = await signedIn();
    await assert.rejects(
      nhost.storage.putString(`/user/${userId}/plain.txt`, 'hello'),
      /Data after transformation must be a string, an ArrayBuffer, a Buffer, or a Stream/,
    );
    await nhost.auth.logout();
  });

  it('uploads, reads metadata and deletes with the fetch adapter', async () => {
    const { nhost, userId } = await signedIn();
    nhost.storage.httpClient.defaults.adapter = fetchAdapter;
    const path = `/user/${userId}/notes.txt`;
    const up = await nhost.storage.putString(path, 'hello from node', 'raw', {
      'content-type': 'text/plain',
    });
    assert.equal(up.key, path.slice(1));
    assert.equal(up.ContentLength, 15);
    assert.equal(up.ContentType, 'text/plain');
    const meta = await nhost.storage.getMetadata(path);
    assert.match(meta.Metadata.token, /^[0-9a-f-]{36}$/);
    const file = await fetch(`${baseURL}/storage/o${path}?token=${meta.Metadata.token}`);
    assert.equal(await file.text(), 'hello from node');
    await nhost.storage.delete(path);
    await assert.rejects(
      nhost.storage.getMetadata(path),
      (e: { response?: { status: number } }) => e.response?.status === 404,
    );
    await nhost.auth.logout();
  });
});
