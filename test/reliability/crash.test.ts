/**
 * SIGKILL of the real service process in the middle of uploads, token refreshes and registrations, then
 * a restart on the same data: no temporary file and no unreferenced data file is left, no object is
 * partial (each key is absent or byte-exact), every upload that got a 2xx is there byte-exact, every
 * registration that got a 2xx can sign in, no account is half-written, and each session has exactly one
 * live refresh token: the one the last 2xx refresh returned, or (when a refresh was cut off) the one that
 * refresh committed whole. PGlite runs with the fs backend, PostgreSQL with S3 (s3rver), so both
 * databases and both backends are killed mid-write.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Database, openPglite } from '../../src/db/database.ts';
import { temporaryFiles } from '../../src/storage/backends/fs.ts';
import { HS_KEY, newEmail } from '../helpers/accounts.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, dbKinds, migratedPgliteDump, type TestDatabase } from '../helpers/db.ts';
import { killIfRunning, REPO_ROOT, runNode, type ServiceProcess } from '../helpers/process.ts';
import { type S3Peer, startS3rver, uniqueBucket } from '../storage/helpers.ts';

const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const ADMIN = 'crash-test-admin-secret';
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

interface Account {
  email: string;
  password: string;
  /** The refresh token of the last refresh answered 2xx (or of the registration). */
  live: string;
  /** A refresh was sent and never answered (cut off by the kill). */
  cutOff: boolean;
}

/** Every `.data` file under the fs store's objects that no metadata file names. */
function unreferencedDataFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    const named = new Set<string>();
    for (const e of entries) {
      if (e.isFile() && e.name.endsWith('~meta.json'))
        named.add((JSON.parse(readFileSync(path.join(dir, e.name), 'utf8')) as { data: string }).data);
    }
    for (const e of entries) {
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else if (e.name.endsWith('.data') && !named.has(e.name)) out.push(path.join(dir, e.name));
    }
  };
  walk(path.join(root, 'objects'));
  return out;
}

const UPLOADERS = 3;

for (const kind of dbKinds()) {
  const backend = kind === 'pglite' ? 'fs' : 's3';
  describe(`SIGKILL mid-write [${kind}, ${backend}]`, () => {
    const dataDir = tempDir('gatehouse-crash-');
    let database: TestDatabase | undefined;
    let peer: S3Peer | undefined;
    let service: ServiceProcess | undefined;
    after(async () => {
      killIfRunning(service);
      await service?.exited;
      await database?.drop();
      await peer?.close();
      rmSync(dataDir, { recursive: true, force: true });
    });

    async function start(env: Record<string, string>): Promise<string> {
      service = runNode(MAIN, env);
      return service.listening;
    }

    it('leaves no temporary file, no partial object, no half-written account or session, and loses no 2xx write', async (t) => {
      const env: Record<string, string> = {
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'info',
        JWT_ALGORITHM: 'HS256',
        JWT_KEY: HS_KEY,
        RATE_LIMIT_ENABLED: 'false',
        HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
        AUTO_ACTIVATE_NEW_USERS: 'true',
        ARGON2_MEMORY_COST: '1024',
        ARGON2_TIME_COST: '1',
      };
      if (kind === 'postgres') {
        database = await createTestDatabase('postgres');
        env['DATABASE_URL'] = String(database.url);
        peer = await startS3rver();
        Object.assign(env, {
          S3_ENDPOINT: peer.endpoint,
          S3_BUCKET: uniqueBucket(),
          S3_ACCESS_KEY_ID: 'S3RVER',
          S3_SECRET_ACCESS_KEY: 'S3RVER',
          S3_SSL_ENABLED: 'false',
        });
      } else {
        // A migrated embedded database to start from (initdb in the child would take most of the test).
        const seed = await openPglite(path.join(dataDir, 'db'), await migratedPgliteDump());
        await seed.close();
      }

      let base = await start(env);
      const accounts: Account[] = [];
      for (let i = 0; i < 4; i++) {
        const email = newEmail('crash');
        const password = 'correct horse battery';
        const r = await fetch(`${base}/auth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password, cookie: false }),
        });
        const text = await r.text();
        assert.equal(r.status, 200, text);
        const live = (JSON.parse(text) as { refresh_token: string }).refresh_token;
        accounts.push({ email, password, live, cutOff: false });
      }

      const uploaded = new Map<string, string>(); // key → sha256 of a 2xx upload
      const attempted = new Map<string, Buffer>(); // every key sent, answered or not
      const registered: { email: string; password: string }[] = [];
      const unexpected: string[] = [];
      let stop = false;

      const uploader = async (w: number) => {
        for (let i = 0; !stop; i++) {
          const key = `public/crash/${w}-${i}.bin`;
          // On S3 up to 7 MiB: past the 5 MiB part size, so multipart uploads are cut off too.
          const body = randomBytes(randomInt(50_000, (backend === 's3' ? 7 : 2) * 1024 * 1024));
          attempted.set(key, body);
          try {
            const r = await fetch(`${base}/storage/o/${key}`, {
              method: 'POST',
              headers: { 'content-type': 'application/octet-stream', 'x-admin-secret': ADMIN },
              body,
            });
            const text = await r.text();
            if (r.status === 200) uploaded.set(key, sha256(body));
            else if (r.status >= 500) unexpected.push(`upload ${r.status} ${text}`);
          } catch {
            return; // cut off by the kill: outcome unknown
          }
        }
      };
      const refresher = async (a: Account) => {
        while (!stop) {
          try {
            a.cutOff = true;
            const r = await fetch(`${base}/auth/token/refresh?refresh_token=${encodeURIComponent(a.live)}`);
            const text = await r.text();
            a.cutOff = false;
            if (r.status === 200) a.live = (JSON.parse(text) as { refresh_token: string }).refresh_token;
            else unexpected.push(`refresh ${r.status} ${text}`);
          } catch {
            return;
          }
        }
      };
      const registrar = async () => {
        while (!stop) {
          const who = { email: newEmail('crash-reg'), password: 'correct horse battery' };
          try {
            const r = await fetch(`${base}/auth/register`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ ...who, cookie: false }),
            });
            const text = await r.text();
            if (r.status === 200) registered.push(who);
            else unexpected.push(`register ${r.status} ${text}`);
          } catch {
            return;
          }
        }
      };
      const load = Promise.all([
        ...Array.from({ length: UPLOADERS }, (_, w) => uploader(w)),
        ...accounts.map((a) => refresher(a)),
        registrar(),
      ]);
      // Killed once some writes have been answered, at a random moment while others are in flight.
      const deadline = Date.now() + 30_000;
      while ((uploaded.size < 3 || registered.length < 2) && Date.now() < deadline) await sleep(20);
      await sleep(randomInt(0, 300));
      service?.child.kill('SIGKILL');
      assert.equal(await service?.exited, 'SIGKILL');
      stop = true;
      await load;
      assert.deepEqual(unexpected, [], 'nothing failed before the kill');
      t.diagnostic(
        `before the kill: ${uploaded.size}/${attempted.size} uploads and ${registered.length} registrations answered 2xx, ${accounts.filter((a) => a.cutOff).length}/${accounts.length} refreshes cut off`,
      );
      assert.ok(uploaded.size + registered.length > 0, 'work was done before the kill');

      base = await start(env);
      const storageRoot = path.join(dataDir, 'storage');
      if (backend === 'fs') {
        assert.deepEqual(await temporaryFiles(storageRoot), [], 'the start swept the temporary files');
        assert.deepEqual(unreferencedDataFiles(storageRoot), [], 'and the data files no metadata names');
      }
      const cutPuts: string[] = [];
      for (const [key, body] of attempted) {
        const r = await fetch(`${base}/storage/o/${key}`, { headers: { 'x-admin-secret': ADMIN } });
        const got = Buffer.from(await r.arrayBuffer());
        if (uploaded.has(key)) {
          assert.equal(r.status, 200, `${key}: a 2xx upload is there`);
          assert.equal(sha256(got), uploaded.get(key), `${key}: byte-exact`);
        } else if (r.status === 200) {
          // A PUT that the kill cut off midway: S3 keeps no object, s3rver a partial one (S3Peer).
          if (backend === 's3' && peer?.unfinishedPut(key)) {
            cutPuts.push(key);
            continue;
          }
          assert.equal(sha256(got), sha256(body), `${key}: an object is never partial`);
        } else assert.equal(r.status, 404, `${key}: ${r.status}`);
      }
      assert.ok(cutPuts.length <= UPLOADERS, `one cut-off PUT per uploader at most: ${cutPuts.join(', ')}`);
      for (const who of registered) {
        const r = await fetch(`${base}/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...who, cookie: false }),
        });
        assert.equal(r.status, 200, `${who.email} registered with a 2xx signs in`);
      }
      service?.child.kill('SIGTERM');
      await service?.exited;

      // The database, read directly once the service is stopped (PGlite allows one process).
      const db: Database =
        kind === 'pglite' ? await openPglite(path.join(dataDir, 'db')) : (database as TestDatabase).db;
      try {
        const n = async (sql: string, params: unknown[] = []) =>
          Number((await db.query<{ n: number }>('check', sql, params)).rows[0]?.n);
        assert.equal(
          await n(
            'SELECT count(*)::int AS n FROM public.users u WHERE NOT EXISTS (SELECT 1 FROM auth.accounts a WHERE a.user_id = u.id)',
          ),
          0,
          'no user row without its account',
        );
        assert.equal(
          await n(
            'SELECT count(*)::int AS n FROM auth.accounts a WHERE NOT EXISTS (SELECT 1 FROM auth.account_roles r WHERE r.account_id = a.id)',
          ),
          0,
          'no account without its roles',
        );
        for (const a of accounts) {
          const live = await db.query<{ token_hash: string }>(
            'live',
            `SELECT t.token_hash FROM auth.session_tokens t JOIN auth.accounts a ON a.id = t.account_id
              WHERE a.email = $1 AND t.rotated_at IS NULL`,
            [a.email],
          );
          assert.equal(live.rows.length, 1, `${a.email}: one live refresh token`);
          const hash = live.rows[0]?.token_hash;
          if (!a.cutOff)
            assert.equal(hash, sha256(a.live), `${a.email}: the last 2xx refresh is the live one`);
          else if (hash !== sha256(a.live)) {
            // The cut-off refresh committed: then the token it replaced is rotated, not also live.
            const old = await n(
              'SELECT count(*)::int AS n FROM auth.session_tokens WHERE token_hash = $1 AND rotated_at IS NOT NULL',
              [sha256(a.live)],
            );
            assert.equal(old, 1, `${a.email}: the cut-off refresh committed whole`);
          }
        }
      } finally {
        if (kind === 'pglite') await db.close();
      }
    });
  });
}
