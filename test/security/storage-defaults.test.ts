/**
 * The built-in storage defaults, attacked over a real socket on both backends: under the built-in rules
 * an anonymous caller (or another user) can read `/public` but can neither overwrite nor delete what is
 * there, and an upload past the default STORAGE_MAX_UPLOAD_SIZE (50 MiB) is refused with 413 before it is
 * stored. HBP shipped `write: true` on `/public*` and no upload limit; both are deliberate differences.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { accessToken } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';
import { buildStorageApp, dbBackendPairs, type S3Peer, startS3rver, userIdFor } from '../storage/helpers.ts';

const ADMIN = 'storage-defaults-admin-secret';
const OWNER = userIdFor('public-owner');
const OTHER = userIdFor('public-other');
const MIB = 1024 * 1024;

interface Answer {
  status: number;
  body: string;
}

/** One request over the socket; the body is written in chunks so that none of it is buffered whole. */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: { chunk: Buffer; times: number },
): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
      const out: Buffer[] = [];
      res.on('data', (c: Buffer) => out.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(out).toString() }));
    });
    // The server may refuse and close before the whole body is sent.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    if (body) {
      let sent = 0;
      const pump = () => {
        while (sent < body.times) {
          sent += 1;
          if (!req.write(body.chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    } else req.end();
  });
}

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

for (const [db, backend] of dbBackendPairs()) {
  describe(`built-in storage defaults [${backend}, ${db}]`, () => {
    let t: TestApp;
    let base: string;
    let owner: string;
    let other: string;
    const text = (s: string) => ({ 'content-type': 'text/plain', 'content-length': String(s.length) });
    const put = (path: string, data: string, headers: Record<string, string> = {}) =>
      send(
        base,
        'POST',
        `/storage/o/${path}`,
        { ...text(data), ...headers },
        {
          chunk: Buffer.from(data),
          times: 1,
        },
      );
    const read = async (path: string) => {
      const res = await fetch(`${base}/storage/o/${path}`);
      return { status: res.status, body: await res.text() };
    };

    before(async () => {
      // No rules file, no STORAGE_MAX_UPLOAD_SIZE: the built-in defaults.
      t = await buildStorageApp(backend, peer, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN }, db);
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
      owner = await accessToken(t, OWNER);
      other = await accessToken(t, OTHER);
      assert.equal((await put('public/site/logo.txt', 'original', { 'x-admin-secret': ADMIN })).status, 200);
      const mine = await put(`public/${OWNER}/avatar.txt`, 'mine', { authorization: `Bearer ${owner}` });
      assert.equal(mine.status, 200, mine.body);
    });
    after(() => t.close());

    it('lets anyone read and list /public', async () => {
      assert.deepEqual(await read('public/site/logo.txt'), { status: 200, body: 'original' });
      assert.deepEqual(await read(`public/${OWNER}/avatar.txt`), { status: 200, body: 'mine' });
      const list = await fetch(`${base}/storage/m/public/`);
      assert.equal(list.status, 200);
    });

    it('refuses an anonymous overwrite of a public file, which stays as it was', async () => {
      for (const path of ['public/site/logo.txt', `public/${OWNER}/avatar.txt`]) {
        const res = await put(path, 'defaced');
        assert.equal(res.status, 403, `${path}: ${res.body}`);
        assert.equal(JSON.parse(res.body).code, 'FORBIDDEN');
      }
      assert.deepEqual(await read('public/site/logo.txt'), { status: 200, body: 'original' });
      assert.deepEqual(await read(`public/${OWNER}/avatar.txt`), { status: 200, body: 'mine' });
    });

    it('refuses an anonymous delete of a public file, which stays readable', async () => {
      for (const path of ['public/site/logo.txt', `public/${OWNER}/avatar.txt`]) {
        const res = await send(base, 'DELETE', `/storage/o/${path}`, {});
        assert.equal(res.status, 403, `${path}: ${res.body}`);
      }
      assert.equal((await read('public/site/logo.txt')).status, 200);
      assert.equal((await read(`public/${OWNER}/avatar.txt`)).status, 200);
    });

    it("refuses a new anonymous file under /public (no free hosting for anyone's content)", async () => {
      assert.equal((await put('public/new.txt', 'spam')).status, 403);
      assert.equal((await read('public/new.txt')).status, 404);
    });

    it("refuses another signed-in user's overwrite and delete in an owner's /public folder", async () => {
      const bearer = { authorization: `Bearer ${other}` };
      assert.equal((await put(`public/${OWNER}/avatar.txt`, 'defaced', bearer)).status, 403);
      assert.equal((await send(base, 'DELETE', `/storage/o/public/${OWNER}/avatar.txt`, bearer)).status, 403);
      assert.equal((await put('public/site/logo.txt', 'defaced', bearer)).status, 403);
      assert.deepEqual(await read(`public/${OWNER}/avatar.txt`), { status: 200, body: 'mine' });
    });

    it('lets the owner write and delete under /public/<their user id>/', async () => {
      const bearer = { authorization: `Bearer ${owner}` };
      assert.equal((await put(`public/${OWNER}/deep/note.txt`, 'v1', bearer)).status, 200);
      assert.equal((await put(`public/${OWNER}/deep/note.txt`, 'v2', bearer)).status, 200);
      assert.deepEqual(await read(`public/${OWNER}/deep/note.txt`), { status: 200, body: 'v2' });
      assert.equal(
        (await send(base, 'DELETE', `/storage/o/public/${OWNER}/deep/note.txt`, bearer)).status,
        204,
      );
      assert.equal((await read(`public/${OWNER}/deep/note.txt`)).status, 404);
    });

    it('refuses with 413 an upload past the default limit of 50 MiB, storing nothing', async () => {
      assert.equal(t.config.STORAGE_MAX_UPLOAD_SIZE, 50 * MIB);
      // Declared too large: refused before the body is read.
      const declared = await send(base, 'POST', '/storage/o/public/site/declared.bin', {
        'x-admin-secret': ADMIN,
        'content-type': 'application/octet-stream',
        'content-length': String(50 * MIB + 1),
      });
      assert.equal(declared.status, 413);
      assert.equal(JSON.parse(declared.body).code, 'PAYLOAD_TOO_LARGE');
      // Not declared (chunked): refused once it grows past the limit.
      const chunked = await send(
        base,
        'POST',
        '/storage/o/public/site/chunked.bin',
        {
          'x-admin-secret': ADMIN,
          'content-type': 'application/octet-stream',
          'transfer-encoding': 'chunked',
        },
        { chunk: Buffer.alloc(MIB, 1), times: 51 },
      );
      assert.equal(chunked.status, 413);
      for (const key of ['public/site/declared.bin', 'public/site/chunked.bin']) {
        const meta = await t.app.inject({ url: `/storage/m/${key}`, headers: { 'x-admin-secret': ADMIN } });
        assert.equal(meta.statusCode, 404, key);
      }
    });
  });
}
