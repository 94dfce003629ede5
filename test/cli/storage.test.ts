/**
 * `gatehouse storage reconcile` and `gatehouse users set-quota` against an installation (embedded
 * PGlite in DATA_DIR, and PostgreSQL), each on the folder store and on s3rver, checked through the
 * service's own routes. Also the start itself: an upload a crash cut off between the store and the
 * database is completed by the next start, for its uploader.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { reserveQuota } from '../../src/storage/quotas.ts';
import { type CliInstallation, cliInstallation } from '../helpers/cli.ts';
import { dbKinds } from '../helpers/db.ts';
import {
  type BackendKind,
  backendKinds,
  type S3Peer,
  startS3rver,
  uniqueBucket,
} from '../storage/helpers.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'the-admin-secret';

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

type App = Parameters<Parameters<CliInstallation['withService']>[0]>[1];
type Ctx = Parameters<Parameters<CliInstallation['withService']>[0]>[0];

const login = async (app: App, email: string) => {
  const res = await app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password: PASSWORD, cookie: false },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().jwt_token as string;
};
const storageOf = (ctx: Ctx) => {
  const s = ctx.storage;
  if (!s) throw new Error('storage is off');
  return s;
};

for (const kind of dbKinds()) {
  for (const backend of backendKinds as BackendKind[]) {
    describe(`gatehouse storage / users set-quota [${kind}, ${backend}]`, () => {
      let g: CliInstallation;
      let userId: string;
      const email = 'quota@example.com';
      before(async () => {
        const s3: Record<string, string> =
          backend === 's3'
            ? {
                S3_ENDPOINT: peer.endpoint,
                S3_BUCKET: uniqueBucket(),
                S3_ACCESS_KEY_ID: 'S3RVER',
                S3_SECRET_ACCESS_KEY: 'S3RVER',
                S3_SSL_ENABLED: 'false',
              }
            : {};
        g = await cliInstallation(kind, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN, ...s3 });
        const made = await g.gatehouse('users', 'create', email, '--password', PASSWORD, '--active');
        assert.equal(made.code, 0, made.err);
        userId = made.out.trim();
      });
      after(() => g?.close());

      it('set-quota sets, lifts and drops an override; uploads over it are refused with 413', async () => {
        const set = await g.gatehouse('users', 'set-quota', email, '10');
        assert.equal(set.code, 0, set.err);
        assert.deepEqual(JSON.parse(set.out), { used_bytes: 0, quota_bytes: 10, files: 0 });
        await g.withService(async (_ctx, app) => {
          const jwt = await login(app, email);
          const headers = { authorization: `Bearer ${jwt}`, 'content-type': 'text/plain' };
          const over = await app.inject({
            method: 'POST',
            url: `/storage/o/user/${userId}/a.txt`,
            payload: 'eleven byte',
            headers,
          });
          assert.equal(over.statusCode, 413);
          assert.equal(over.json().code, 'QUOTA_EXCEEDED');
          const fits = await app.inject({
            method: 'POST',
            url: `/storage/o/user/${userId}/a.txt`,
            payload: 'ten bytes!',
            headers,
          });
          assert.equal(fits.statusCode, 200);
          const usage = await app.inject({ method: 'GET', url: '/storage/usage', headers });
          assert.deepEqual(usage.json(), { used_bytes: 10, quota_bytes: 10, files: 1 });
        });
        const byId = await g.gatehouse('users', 'set-quota', userId, 'unlimited');
        assert.equal(byId.code, 0, byId.err);
        assert.deepEqual(JSON.parse(byId.out), { used_bytes: 10, quota_bytes: null, files: 1 });
        const dropped = await g.gatehouse('users', 'set-quota', email, 'default');
        assert.equal(dropped.code, 0);
        assert.match(dropped.err, /STORAGE_QUOTA_BYTES/);
        const sized = await g.gatehouse('users', 'set-quota', email, '2KiB');
        assert.equal(JSON.parse(sized.out).quota_bytes, 2048);
      });

      it('set-quota refuses a bad quota (exit 2) and an unknown account (exit 1)', async () => {
        const bad = await g.gatehouse('users', 'set-quota', email, 'lots');
        assert.equal(bad.code, 2);
        assert.match(bad.err, /not a quota/);
        const missing = await g.gatehouse('users', 'set-quota', 'nobody@example.com', '10');
        assert.equal(missing.code, 1);
        assert.match(missing.err, /no account/);
      });

      it('the next start completes an upload a crash cut off, for its uploader', async () => {
        const key = `user/${userId}/cut-off.txt`;
        await g.withService(async (ctx, app) => {
          const storage = storageOf(ctx);
          await storage.catalog.ready;
          const deps = { config: ctx.config, db: ctx.db, clock: ctx.clock, ...storage };
          // What the crash leaves: the reservation (its lease over) and the object, but no row.
          await reserveQuota(deps, {
            ownerId: userId,
            key,
            bytes: 8,
            expiresAt: new Date(Date.now() - 1000),
          });
          await storage.objects.put(key, Readable.from([Buffer.from('cut off!')]), {
            contentType: 'text/plain',
            token: 't',
          });
          const got = await app.inject({
            method: 'GET',
            url: `/storage/o/${key}`,
            headers: { 'x-admin-secret': ADMIN },
          });
          assert.equal(got.statusCode, 404);
        });
        await g.withService(async (ctx, app) => {
          await storageOf(ctx).catalog.ready;
          const jwt = await login(app, email);
          const got = await app.inject({
            method: 'GET',
            url: `/storage/o/${key}`,
            headers: { authorization: `Bearer ${jwt}` },
          });
          assert.equal(got.statusCode, 200);
          assert.equal(got.body, 'cut off!');
          const usage = await app.inject({
            method: 'GET',
            url: '/storage/usage',
            headers: { authorization: `Bearer ${jwt}` },
          });
          assert.equal(usage.json().files, 2, 'owned by its uploader');
        });
      });

      it('reconcile imports objects written around the service and removes rows whose object is gone', async () => {
        await g.withService(async (ctx) => {
          const storage = storageOf(ctx);
          await storage.catalog.ready;
          await storage.objects.put('public/around/x.txt', Readable.from([Buffer.from('x')]), {
            contentType: 'text/plain',
            token: '',
          });
          await storage.objects.delete(`user/${userId}/a.txt`);
        });
        const res = await g.gatehouse('storage', 'reconcile', '--json');
        assert.equal(res.code, 0, res.err);
        const report = JSON.parse(res.out);
        assert.equal(report.imported, 1);
        assert.equal(report.removed, 1);
        await g.withService(async (ctx, app) => {
          await storageOf(ctx).catalog.ready;
          const listed = await app.inject({
            method: 'GET',
            url: '/storage/m/public/around/',
            headers: { 'x-admin-secret': ADMIN },
          });
          assert.deepEqual(
            listed.json().map((f: { key: string }) => f.key),
            ['public/around/x.txt'],
          );
          const jwt = await login(app, email);
          const usage = await app.inject({
            method: 'GET',
            url: '/storage/usage',
            headers: { authorization: `Bearer ${jwt}` },
          });
          assert.deepEqual(usage.json(), { used_bytes: 8, quota_bytes: 2048, files: 1 });
        });
        const again = await g.gatehouse('storage', 'reconcile');
        assert.equal(again.code, 0);
        assert.match(again.out, /0 imported, 0 updated, 0 stale row\(s\) removed/);
      });
    });
  }
}
