/**
 * Storage test helpers: a real S3 peer (s3rver) in the test process, stores of both kinds, and apps
 * built on either backend.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import S3rver from 's3rver';
import { FsObjectStore } from '../../src/storage/backends/fs.ts';
import type { ObjectStore } from '../../src/storage/backends/object-store.ts';
import { S3ObjectStore, type S3Settings } from '../../src/storage/backends/s3.ts';
import { HBP_RULES } from '../../src/storage/rules/rules.ts';
import {
  buildTestApp,
  type ConfigOverrides,
  type TestApp,
  type TestAppOptions,
  tempDir,
} from '../helpers/app.ts';
import { type DbKind, dbKinds } from '../helpers/db.ts';

export type BackendKind = 'fs' | 's3';
export const backendKinds: BackendKind[] = ['fs', 's3'];

/**
 * Database and object-store pairs for suites whose subject depends on neither (image transforms,
 * download names, storage defaults): each database kind and each backend once, rather than every
 * combination, which doubled their time in `npm test` for no added reach. PGlite goes with the folder
 * (the embedded defaults a newcomer runs), PostgreSQL with S3 (a production set-up); without
 * TEST_DATABASE_URL, PGlite takes both backends.
 */
export function dbBackendPairs(): [DbKind, BackendKind][] {
  const kinds = dbKinds();
  return [
    ['pglite', 'fs'],
    [kinds.includes('postgres') ? 'postgres' : 'pglite', 's3'],
  ];
}

export interface S3Peer {
  endpoint: string;
  port: number;
  close(): Promise<void>;
  /** Stops the server but keeps its data, to simulate an outage; `start` brings it back on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /**
   * True when s3rver holds a file for an object whose PUT never finished. s3rver writes a PUT's body in
   * place as it arrives and records the object's MD5 only once the body is complete, so a PUT cut off
   * midway (its client killed) leaves a partial object that it then serves. S3 itself never makes an
   * object of an incomplete PUT; a test of "never a partial object" must not count s3rver's.
   */
  unfinishedPut(key: string): boolean;
}

export async function startS3rver(): Promise<S3Peer> {
  const dir = tempDir('gatehouse-s3rver-');
  let port = 0;
  let server: S3rver | undefined;
  const start = async () => {
    if (server) return;
    server = new S3rver({ port, address: '127.0.0.1', silent: true, directory: dir });
    port = (await server.run()).port;
  };
  await start();
  return {
    get endpoint() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    start,
    async stop() {
      await server?.close();
      server = undefined;
    },
    async close() {
      await server?.close();
      server = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
    unfinishedPut(key) {
      const name = `${path.basename(key)}._S3rver_object`;
      const folder = path.dirname(key);
      return readdirSync(dir, { recursive: true, withFileTypes: true }).some(
        (e) =>
          e.isFile() &&
          e.name === name &&
          e.parentPath.endsWith(folder) &&
          !existsSync(path.join(e.parentPath, `${e.name}.md5`)),
      );
    },
  };
}

export function uniqueBucket(): string {
  return `test-${randomBytes(6).toString('hex')}`;
}

export function s3Settings(peer: S3Peer, extra: Partial<S3Settings> = {}): S3Settings {
  return {
    endpoint: peer.endpoint,
    sslEnabled: false,
    bucket: uniqueBucket(),
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    ...extra,
  };
}

export interface StoreUnderTest {
  store: ObjectStore;
  /** The fs root (fs only). */
  root?: string;
  close(): Promise<void>;
}

export async function makeStore(kind: BackendKind, peer?: S3Peer, extra: Partial<S3Settings> = {}) {
  if (kind === 'fs') {
    const root = tempDir('gatehouse-fs-store-');
    const store = new FsObjectStore(root);
    await store.init();
    return {
      store,
      root,
      async close() {
        await store.close();
        rmSync(root, { recursive: true, force: true });
      },
    } satisfies StoreUnderTest;
  }
  if (!peer) throw new Error('an s3 store needs the s3rver peer');
  const store = new S3ObjectStore(s3Settings(peer, extra));
  await store.init();
  return {
    store,
    async close() {
      await store.close();
    },
  } satisfies StoreUnderTest;
}

/** The app on the given backend (s3: a fresh bucket on `peer`). */
export function buildStorageApp(
  backend: BackendKind,
  peer: S3Peer | undefined,
  overrides: ConfigOverrides = {},
  db: DbKind = 'pglite',
  opts: TestAppOptions = {},
): Promise<TestApp> {
  const s3: ConfigOverrides =
    backend === 's3' && peer
      ? {
          S3_ENDPOINT: peer.endpoint,
          S3_BUCKET: uniqueBucket(),
          S3_ACCESS_KEY_ID: 'S3RVER',
          S3_SECRET_ACCESS_KEY: 'S3RVER',
          S3_SSL_ENABLED: false,
        }
      : {};
  return buildTestApp(db, { ...s3, ...overrides }, opts);
}

/** A fixed user id (a UUID, as every account's is) for a name used in a test: `userIdFor('alice')`. */
export function userIdFor(name: string): string {
  const h = createHash('sha256').update(name).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

let hbpRulesFile: string | undefined;
/**
 * Settings that load HBP's shipped rules (anyone may write under `/public`), for suites about something
 * other than access control that upload anonymously. The built-in defaults refuse that.
 */
export function hbpRules(): { STORAGE_RULES_PATH: string } {
  if (!hbpRulesFile) {
    const dir = tempDir('gatehouse-hbp-rules-');
    hbpRulesFile = path.join(dir, 'rules.yaml');
    writeFileSync(hbpRulesFile, HBP_RULES);
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return { STORAGE_RULES_PATH: hbpRulesFile };
}
