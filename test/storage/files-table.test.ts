/**
 * storage.files kept in step with the object store, and quotas, on both databases and both backends:
 * rows written by uploads (raw and multipart), overwrites and deletes; an object left without its row
 * (a crash between the store and the database, reproduced by writing what the crash leaves: the object
 * and the upload's reservation, but no row) is never served, listed or zipped until the repair completes
 * it for its uploader; objects already in the store are imported; listings and zips read the table;
 * quotas hold under concurrent uploads.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import yauzl from 'yauzl';
import { FileCatalog, reconcile, repairInterrupted } from '../../src/storage/files.ts';
import { reserveQuota, setUserQuota } from '../../src/storage/quotas.ts';
import { accessToken, createAccount, newEmail } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { type BackendKind, backendKinds, buildStorageApp, type S3Peer, startS3rver } from './helpers.ts';

const ADMIN = 'the-admin-secret';
const silent = { level: 'silent', info() {}, warn() {}, error() {}, debug() {} } as never;

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

function zipNames(buf: Buffer): Promise<string[]> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const names: string[] = [];
      zip.on('entry', (e: yauzl.Entry) => {
        names.push(e.fileName);
        zip.readEntry();
      });
      zip.on('end', () => resolve(names.sort()));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

for (const kind of dbKinds()) {
  for (const backend of backendKinds as BackendKind[]) {
    describe(`storage.files [${kind}, ${backend}]`, () => {
      let t: TestApp;
      const users: { id: string; jwt: string }[] = [];
      const auth = (jwt: string) => ({ authorization: `Bearer ${jwt}` });
      const admin = { 'x-admin-secret': ADMIN };
      const storage = () => {
        const s = t.ctx.storage;
        if (!s) throw new Error('storage is off');
        return s;
      };
      /** What completeUpload and the repairs use: the app's storage deps. */
      const deps = () => ({ config: t.config, db: t.ctx.db, clock: t.clock, ...storage() });

      before(async () => {
        t = await buildStorageApp(backend, peer, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN }, kind);
        for (let i = 0; i < 4; i++) {
          const { userId } = await createAccount(t, { email: newEmail('files') });
          users.push({ id: userId, jwt: await accessToken(t, userId) });
        }
        await storage().catalog.ready;
        assert.equal(storage().catalog.imported, true, 'a fresh store is imported at once');
      });
      after(() => t.close());

      const user = (i: number) => users[i] as { id: string; jwt: string };
      const rawUpload = (url: string, body: string | Buffer, headers: Record<string, string>) =>
        t.app.inject({
          method: 'POST',
          url,
          payload: body,
          headers: { 'content-type': 'text/plain', ...headers },
        });
      const multipartUpload = (url: string, data: string | Buffer, headers: Record<string, string>) => {
        const mp = multipartBody([{ name: 'file', filename: 'f.txt', type: 'text/plain', data }]);
        return t.app.inject({
          method: 'POST',
          url,
          payload: mp.payload,
          headers: { ...mp.headers, ...headers },
        });
      };
      const row = async (key: string) =>
        (
          await t.ctx.db.query<{ size: number; owner_id: string | null; etag: string; token: string }>(
            'test-row',
            'SELECT size::float8 AS size, owner_id, etag, token FROM storage.files WHERE key = $1',
            [key],
          )
        ).rows[0];
      const reservations = async () =>
        (await t.ctx.db.query('test-reservations', 'SELECT id FROM storage.upload_reservations')).rowCount;

      it('writes the row of an upload (raw and multipart), updates it on overwrite, removes it on delete', async () => {
        const u = user(0);
        const key = `user/${u.id}/in-step.txt`;
        const first = await rawUpload(`/storage/o/${key}`, 'one', auth(u.jwt));
        assert.equal(first.statusCode, 200, first.body);
        assert.deepEqual(await row(key), {
          size: 3,
          owner_id: u.id,
          etag: first.json().ETag,
          token: first.json().Metadata.token,
        });
        const second = await multipartUpload(`/storage/o/${key}`, 'second version', auth(u.jwt));
        assert.equal(second.statusCode, 200, second.body);
        const r = await row(key);
        assert.equal(r?.size, 14);
        assert.equal(r?.etag, second.json().ETag);
        assert.equal(await reservations(), 0, 'every reservation is settled by its completion');
        // Token rotation follows into the row (listings hand the token to the rules).
        const rotated = await t.app.inject({
          method: 'POST',
          url: `/storage/m/${key}`,
          payload: { action: 'revoke-token' },
          headers: admin,
        });
        assert.equal(rotated.statusCode, 200);
        assert.equal((await row(key))?.token, rotated.json().Metadata.token);
        const del = await t.app.inject({ method: 'DELETE', url: `/storage/o/${key}`, headers: auth(u.jwt) });
        assert.equal(del.statusCode, 204);
        assert.equal(await row(key), undefined);
      });

      it('an object a crash left without its row is not served, listed or zipped until the repair completes it for its uploader', async () => {
        const u = user(1);
        const folder = `user/${u.id}/`;
        const kept = await rawUpload(`/storage/o/${folder}crash-kept.txt`, 'kept', auth(u.jwt));
        assert.equal(kept.statusCode, 200);
        // What a crash between the object's write and its row leaves: the upload's reservation (its lease
        // already over) and the object, written into the store directly.
        const key = `${folder}crash-orphan.txt`;
        await reserveQuota(deps(), {
          ownerId: u.id,
          key,
          bytes: 6,
          expiresAt: new Date(t.clock.now().getTime() - 1),
        });
        await storage().objects.put(key, Readable.from([Buffer.from('orphan')]), {
          contentType: 'text/plain',
          token: 'tok',
        });

        for (const method of ['GET', 'HEAD'] as const) {
          const res = await t.app.inject({ method, url: `/storage/o/${key}`, headers: auth(u.jwt) });
          assert.equal(res.statusCode, 404, `${method} of an object without its row`);
        }
        const meta = await t.app.inject({ method: 'GET', url: `/storage/m/${key}`, headers: auth(u.jwt) });
        assert.equal(meta.statusCode, 404);
        const listed = await t.app.inject({
          method: 'GET',
          url: `/storage/m/${folder}`,
          headers: auth(u.jwt),
        });
        assert.deepEqual(
          listed.json().map((f: { key: string }) => f.key),
          [`${folder}crash-kept.txt`],
        );
        const zip = await t.app.inject({ method: 'GET', url: `/storage/o/${folder}`, headers: auth(u.jwt) });
        assert.deepEqual(await zipNames(zip.rawPayload), [`${folder}crash-kept.txt`]);

        // The start's pass (the same FileCatalog.start every start runs) repairs it.
        const catalog = new FileCatalog();
        await catalog.start({ ...deps(), catalog }, silent);
        await catalog.ready;
        await catalog.stop();
        assert.equal((await row(key))?.owner_id, u.id, 'completed for the uploader its reservation names');
        const got = await t.app.inject({ method: 'GET', url: `/storage/o/${key}`, headers: auth(u.jwt) });
        assert.equal(got.statusCode, 200);
        assert.equal(got.body, 'orphan');
        assert.equal(await reservations(), 0);
      });

      it('a file read many times, then deleted, is gone at once; re-uploaded, it is served at once; a row removed around the service stops the serving', async () => {
        const u = user(3);
        const key = `user/${u.id}/hot.txt`;
        const read = () => t.app.inject({ method: 'GET', url: `/storage/m/${key}`, headers: auth(u.jwt) });
        assert.equal((await rawUpload(`/storage/o/${key}`, 'hot', auth(u.jwt))).statusCode, 200);
        for (let i = 0; i < 3; i++) assert.equal((await read()).statusCode, 200);
        const del = await t.app.inject({ method: 'DELETE', url: `/storage/o/${key}`, headers: auth(u.jwt) });
        assert.equal(del.statusCode, 204);
        assert.equal((await read()).statusCode, 404, 'no remembered row outlives its delete');
        assert.equal((await rawUpload(`/storage/o/${key}`, 'hot again', auth(u.jwt))).statusCode, 200);
        assert.equal((await read()).statusCode, 200, 'a new upload is served at once');
        // The row removed by hand (SQL), the object kept: the instance stops serving it once what it
        // remembers lapses (2 s), as an object without its row.
        await t.ctx.db.query('test-drop-row', 'DELETE FROM storage.files WHERE key = $1', [key]);
        const deadline = Date.now() + 10_000;
        let status = 200;
        while (status === 200 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 200));
          status = (await read()).statusCode;
        }
        assert.equal(status, 404, 'an object whose row was removed is not served');
        await storage().objects.delete(key); // leaves no row-less object for the import test below
      });

      it('a reservation that ran out with nothing written is dropped, and frees the quota it held', async () => {
        const u = user(1);
        await reserveQuota(deps(), {
          ownerId: u.id,
          key: `user/${u.id}/never.txt`,
          bytes: 10,
          expiresAt: new Date(t.clock.now().getTime() - 1),
        });
        assert.deepEqual(await repairInterrupted(deps()), { completed: 0, dropped: 1 });
        assert.equal(await row(`user/${u.id}/never.txt`), undefined);
      });

      it('imports the objects already in the store (an HBP deployment), owned by no one, and reconcile removes stale rows', async () => {
        const keys = ['public/legacy/a.txt', 'public/legacy/b/c.txt'];
        for (const k of keys)
          await storage().objects.put(k, Readable.from([Buffer.from(k)]), {
            contentType: 'text/plain',
            token: 'legacy',
          });
        // A row whose object is gone (deleted around the service).
        await t.ctx.db.query(
          'test-stale',
          "INSERT INTO storage.files (key, size, content_type, etag) VALUES ('public/legacy/gone.txt', 1, 'text/plain', '\"x\"')",
        );
        // The first start on this store: no import recorded.
        await t.ctx.db.query('test-unmark', 'DELETE FROM storage.imports');
        const catalog = new FileCatalog();
        assert.equal(catalog.imported, false);
        await catalog.start({ ...deps(), catalog }, silent);
        await catalog.ready;
        await catalog.stop();
        assert.equal(catalog.imported, true);
        for (const k of keys)
          assert.deepEqual(
            { ...(await row(k)), etag: undefined },
            { size: k.length, owner_id: null, etag: undefined, token: 'legacy' },
          );
        const imports = await t.ctx.db.query<{ files: number }>(
          'test-imports',
          'SELECT files::int AS files FROM storage.imports',
        );
        assert.equal(imports.rows[0]?.files, 2);
        // The import adds only; a reconcile also removes what the store no longer holds. Until then the
        // stale row is listed, and a zip leaves its file out instead of failing.
        assert.ok(await row('public/legacy/gone.txt'));
        const withStale = await t.app.inject({
          method: 'GET',
          url: '/storage/o/public/legacy/',
          headers: admin,
        });
        assert.equal(withStale.statusCode, 200, withStale.body.slice(0, 300));
        assert.deepEqual(await zipNames(withStale.rawPayload), [...keys].sort());
        const report = await reconcile(deps(), { removeStale: true });
        assert.equal(report.removed, 1);
        assert.equal(report.imported, 0);
        assert.equal(await row('public/legacy/gone.txt'), undefined);
        // Their rows describe the objects exactly: a zip, which opens each file as the version its row
        // names (ETag and date), reads them.
        const zip = await t.app.inject({ method: 'GET', url: '/storage/o/public/legacy/', headers: admin });
        assert.equal(zip.statusCode, 200, zip.body.slice(0, 300));
        assert.deepEqual(await zipNames(zip.rawPayload), [...keys].sort());
      });

      it('lists and zips a folder from the table: a row-less object is left out, a row is what is listed', async () => {
        const u = user(2);
        // The owner lists their folder; the admin lists a folder whose name holds LIKE's wildcards.
        const folder = `user/${u.id}/`;
        for (const n of ['b.txt', 'a.txt', 'c_d.txt'])
          assert.equal((await rawUpload(`/storage/o/${folder}${n}`, n, auth(u.jwt))).statusCode, 200);
        for (const k of ['public/50%_off/x.txt', 'public/50%_offer/y.txt', 'public/5000_off/z.txt'])
          assert.equal((await rawUpload(`/storage/o/${encodeURI(k)}`, k, admin)).statusCode, 200);
        const wild = await t.app.inject({
          method: 'GET',
          url: '/storage/m/public/50%25_off/',
          headers: admin,
        });
        assert.deepEqual(
          wild.json().map((f: { key: string }) => f.key),
          ['public/50%_off/x.txt'],
        );
        await storage().objects.put(`${folder}rowless.txt`, Readable.from([Buffer.from('r')]), {
          contentType: 'text/plain',
          token: '',
        });
        const listed = await t.app.inject({
          method: 'GET',
          url: `/storage/m/${folder}`,
          headers: auth(u.jwt),
        });
        assert.equal(listed.statusCode, 200);
        const expected = ['a.txt', 'b.txt', 'c_d.txt'].map((n) => `${folder}${n}`);
        assert.deepEqual(
          listed.json().map((f: { key: string }) => f.key),
          expected,
        );
        assert.deepEqual(listed.json()[0].Metadata, { token: (await row(`${folder}a.txt`))?.token });
        const zip = await t.app.inject({ method: 'GET', url: `/storage/o/${folder}`, headers: auth(u.jwt) });
        assert.equal(zip.statusCode, 200);
        assert.deepEqual(await zipNames(zip.rawPayload), expected);
      });

      describe('quotas', () => {
        it('10 concurrent uploads that together exceed the quota: the sum stored never exceeds it, the refused store nothing', async () => {
          const u = user(3);
          await setUserQuota(t.ctx.db, u.id, 1000);
          const body = Buffer.alloc(300, 'q');
          const answers = await Promise.all(
            Array.from({ length: 10 }, (_, i) =>
              i % 2 === 0
                ? rawUpload(`/storage/o/user/${u.id}/q-${i}.bin`, body, auth(u.jwt))
                : multipartUpload(`/storage/o/user/${u.id}/q-${i}.bin`, body, auth(u.jwt)),
            ),
          );
          const ok = answers.filter((a) => a.statusCode === 200).length;
          const refused = answers.filter((a) => a.statusCode === 413);
          assert.equal(ok + refused.length, 10, answers.map((a) => a.statusCode).join());
          assert.ok(ok >= 1 && ok <= 3, `stored ${ok}`);
          for (const r of refused) assert.equal(r.json().code, 'QUOTA_EXCEEDED');
          const usage = await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) });
          assert.equal(usage.statusCode, 200);
          assert.deepEqual(usage.json(), { used_bytes: ok * 300, quota_bytes: 1000, files: ok });
          // The store holds exactly the accepted ones.
          let stored = 0;
          for await (const o of storage().objects.list(`user/${u.id}/q-`)) stored += o.size;
          assert.equal(stored, ok * 300);
          assert.ok(stored <= 1000);
          assert.equal(await reservations(), 0);
        });

        it('an overwrite counts the new size less the old, and admin uploads count for no one', async () => {
          const u = user(3);
          await setUserQuota(t.ctx.db, u.id, 2000);
          const before = (
            await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) })
          ).json();
          const key = `user/${u.id}/over.bin`;
          const free = 2000 - before.used_bytes;
          // Fills the quota to the byte; overwriting the same file with as much fits, with one byte more does not.
          assert.equal(
            (await rawUpload(`/storage/o/${key}`, Buffer.alloc(free), auth(u.jwt))).statusCode,
            200,
          );
          assert.equal(
            (await rawUpload(`/storage/o/${key}`, Buffer.alloc(free), auth(u.jwt))).statusCode,
            200,
          );
          const over = await rawUpload(`/storage/o/${key}`, Buffer.alloc(free + 1), auth(u.jwt));
          assert.equal(over.statusCode, 413);
          assert.equal(over.json().code, 'QUOTA_EXCEEDED');
          assert.equal((await row(key))?.size, free, 'a refused overwrite keeps the old version');
          const full = (
            await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) })
          ).json();
          assert.equal(full.used_bytes, 2000);
          // The admin writes into the user's folder past their quota: not counted.
          const byAdmin = await rawUpload(
            `/storage/o/user/${u.id}/from-admin.bin`,
            Buffer.alloc(5000),
            admin,
          );
          assert.equal(byAdmin.statusCode, 200);
          assert.equal((await row(`user/${u.id}/from-admin.bin`))?.owner_id, null);
          const after = (
            await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) })
          ).json();
          assert.deepEqual(after, full);
          // A smaller overwrite gives bytes back.
          assert.equal((await rawUpload(`/storage/o/${key}`, Buffer.alloc(10), auth(u.jwt))).statusCode, 200);
          const smaller = (
            await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) })
          ).json();
          assert.equal(smaller.used_bytes, 2000 - free + 10);
        });

        it('STORAGE_QUOTA_BYTES applies without an override; unlimited is null', async () => {
          const u = user(2);
          const usage = await t.app.inject({ method: 'GET', url: '/storage/usage', headers: auth(u.jwt) });
          assert.equal(usage.json().quota_bytes, null);
          await setUserQuota(t.ctx.db, u.id, 'default');
          const anon = await t.app.inject({ method: 'GET', url: '/storage/usage' });
          assert.equal(anon.statusCode, 401);
        });

        it('a chunked upload without a length cannot stream past the quota (413, nothing stored)', async () => {
          const u = user(0);
          await setUserQuota(t.ctx.db, u.id, 100);
          const res = await t.app.inject({
            method: 'POST',
            url: `/storage/o/user/${u.id}/chunked.bin`,
            payload: Readable.from([Buffer.alloc(60), Buffer.alloc(60)]),
            headers: { ...auth(u.jwt), 'content-type': 'application/octet-stream' },
          });
          assert.equal(res.statusCode, 413);
          assert.equal(res.json().code, 'QUOTA_EXCEEDED');
          assert.equal(await storage().objects.head(`user/${u.id}/chunked.bin`), undefined);
          // One that fits in what is free goes through (the reservation is what was free, not the limit).
          const small = await t.app.inject({
            method: 'POST',
            url: `/storage/o/user/${u.id}/chunked-small.bin`,
            payload: Readable.from([Buffer.alloc(30), Buffer.alloc(30)]),
            headers: { ...auth(u.jwt), 'content-type': 'application/octet-stream' },
          });
          assert.equal(small.statusCode, 200, small.body);
          assert.equal((await row(`user/${u.id}/chunked-small.bin`))?.size, 60);
          assert.equal(await row(`user/${u.id}/chunked.bin`), undefined);
          await setUserQuota(t.ctx.db, u.id, 'default');
        });
      });
    });
  }
}
