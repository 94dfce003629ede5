/**
 * The /storage routes on both backends (local folder and s3rver), with the built-in rules unless a test
 * says otherwise.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import yauzl from 'yauzl';
import { configFrom } from '../../src/config.ts';
import { createContext } from '../../src/context.ts';
import { accessToken } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { multipartBody } from '../helpers/multipart.ts';
import {
  type BackendKind,
  backendKinds,
  buildStorageApp,
  type S3Peer,
  startS3rver,
  userIdFor,
} from './helpers.ts';

const ADMIN = 'the-admin-secret';
// User ids are UUIDs (a token whose user-id is not one is refused).
const [ALICE, BOB, LIST_A, EMPTY_USER, ZIPPER] = ['alice', 'bob', 'list-a', 'empty-user', 'zipper'].map(
  userIdFor,
) as [string, string, string, string, string];

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

/** A request whose path goes on the wire exactly as written. */
function rawRequest(
  base: string,
  method: string,
  rawPath: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path: rawPath, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(method === 'POST' ? body : undefined);
  });
}

function unzip(buf: Buffer): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const out = new Map<string, Buffer>();
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            out.set(entry.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(out));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

for (const backend of backendKinds as BackendKind[]) {
  describe(`storage routes [${backend}]`, () => {
    let t: TestApp;
    let alice: string;
    let bob: string;
    /** The app on a real socket, for what inject() cannot send. */
    let base: string;
    const auth = (token: string) => ({ authorization: `Bearer ${token}` });

    before(async () => {
      t = await buildStorageApp(backend, peer, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN });
      alice = await accessToken(t, ALICE);
      bob = await accessToken(t, BOB);
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => t.close());

    async function upload(
      url: string,
      data: string | Buffer,
      headers: Record<string, string> = {},
      type = 'text/plain',
    ) {
      const mp = multipartBody([{ name: 'file', filename: path.basename(url), type, data }]);
      return t.app.inject({
        method: 'POST',
        url,
        payload: mp.payload,
        headers: { ...mp.headers, ...headers },
      });
    }

    describe('upload', () => {
      it('stores a multipart file part "file" and answers exactly the metadata object', async () => {
        const res = await upload(`/storage/o/user/${ALICE}/hello.txt`, 'hello', auth(alice));
        assert.equal(res.statusCode, 200);
        const body = res.json();
        assert.deepEqual(Object.keys(body), [
          'key',
          'AcceptRanges',
          'LastModified',
          'ContentLength',
          'ETag',
          'ContentType',
          'Metadata',
        ]);
        assert.equal(body.key, `user/${ALICE}/hello.txt`);
        assert.equal(body.AcceptRanges, 'bytes');
        assert.equal(body.ContentLength, 5);
        assert.equal(body.ContentType, 'text/plain');
        assert.equal(body.ETag, '"5d41402abc4b2a76b9719d911017c592"');
        assert.ok(!Number.isNaN(Date.parse(body.LastModified)));
        assert.deepEqual(Object.keys(body.Metadata), ['token']);
        assert.match(
          body.Metadata.token,
          /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
        );
      });

      it('accepts a raw body with its Content-Type', async () => {
        const res = await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${ALICE}/data.json`,
          payload: '{"a":1}',
          headers: { ...auth(alice), 'content-type': 'application/json' },
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.json().ContentType, 'application/json');
        const got = await t.app.inject({ url: `/storage/o/user/${ALICE}/data.json`, headers: auth(alice) });
        assert.equal(got.body, '{"a":1}');
      });

      it('refuses a POST with neither a body nor a content type with 400 and stores nothing', async () => {
        const res = await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${ALICE}/forgot.txt`,
          headers: auth(alice),
        });
        assert.equal(res.statusCode, 400);
        assert.equal(res.json().code, 'FILE_MISSING');
        const got = await t.app.inject({ url: `/storage/o/user/${ALICE}/forgot.txt`, headers: auth(alice) });
        assert.equal(got.statusCode, 404);
      });

      it('sniffs the type from the bytes when the claim is missing or generic', async () => {
        const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), randomBytes(64)]);
        const res = await upload(
          `/storage/o/user/${ALICE}/pic`,
          png,
          auth(alice),
          'application/octet-stream',
        );
        assert.equal(res.json().ContentType, 'image/png');
        const html = await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${ALICE}/page`,
          payload: '<!doctype html><script>alert(1)</script>',
          headers: auth(alice),
        });
        assert.equal(html.statusCode, 200);
        assert.equal(html.json().ContentType, 'text/html');
      });

      it('keeps the token when a file is overwritten', async () => {
        const first = (await upload(`/storage/o/user/${ALICE}/keep.txt`, 'one', auth(alice))).json();
        const second = (await upload(`/storage/o/user/${ALICE}/keep.txt`, 'two!', auth(alice))).json();
        assert.equal(second.Metadata.token, first.Metadata.token);
        assert.equal(second.ContentLength, 4);
      });

      it("refuses an upload into another user's folder with 403 and stores nothing", async () => {
        const res = await upload(`/storage/o/user/${ALICE}/intruder.txt`, 'x', auth(bob));
        assert.equal(res.statusCode, 403);
        assert.deepEqual(res.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message:
            'Forbidden by the storage rules: the rules of path "/user/:userId/:fileId" (write) do not allow create to this user.',
          code: 'FORBIDDEN',
        });
        assert.equal(
          (await t.app.inject({ url: `/storage/m/user/${ALICE}/intruder.txt`, headers: auth(alice) }))
            .statusCode,
          404,
        );
      });

      it('answers 400 for a path ending in "/"', async () => {
        const res = await upload(`/storage/o/user/${ALICE}/folder/`, 'x', auth(alice));
        assert.equal(res.statusCode, 400);
        assert.equal(res.json().code, 'FOLDER_UPLOAD');
      });

      it('answers 400 without a file part, and with two file parts, storing nothing', async () => {
        const none = multipartBody([{ name: 'other', data: 'field' }]);
        const r1 = await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${ALICE}/none.txt`,
          payload: none.payload,
          headers: { ...none.headers, ...auth(alice) },
        });
        assert.equal(r1.statusCode, 400);
        assert.equal(r1.json().code, 'FILE_MISSING');
        const two = multipartBody([
          { name: 'file', filename: 'a', type: 'text/plain', data: 'first' },
          { name: 'file', filename: 'b', type: 'text/plain', data: 'second' },
        ]);
        const r2 = await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${ALICE}/two.txt`,
          payload: two.payload,
          headers: { ...two.headers, ...auth(alice) },
        });
        assert.equal(r2.statusCode, 400);
        assert.equal(r2.json().code, 'TOO_MANY_FILES');
        for (const k of ['none.txt', 'two.txt']) {
          assert.equal(
            (await t.app.inject({ url: `/storage/m/user/${ALICE}/${k}`, headers: auth(alice) })).statusCode,
            404,
          );
        }
      });

      it('answers 401 for an invalid bearer token', async () => {
        const res = await upload('/storage/o/public/x.txt', 'x', { authorization: 'Bearer a.b.c' });
        assert.equal(res.statusCode, 401);
      });
    });

    describe('download', () => {
      let etag: string;
      let lastModified: string;
      before(async () => {
        const res = await upload(`/storage/o/user/${ALICE}/digits.txt`, '0123456789', auth(alice));
        etag = res.json().ETag;
        const head = await t.app.inject({
          method: 'HEAD',
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: auth(alice),
        });
        lastModified = String(head.headers['last-modified']);
      });

      it('streams the bytes with validators, Accept-Ranges and private caching', async () => {
        const res = await t.app.inject({ url: `/storage/o/user/${ALICE}/digits.txt`, headers: auth(alice) });
        assert.equal(res.statusCode, 200);
        assert.equal(res.body, '0123456789');
        assert.equal(res.headers.etag, etag);
        assert.equal(res.headers['accept-ranges'], 'bytes');
        assert.equal(res.headers['content-length'], '10');
        assert.equal(res.headers['cache-control'], 'private, no-cache');
        assert.equal(res.headers['x-content-type-options'], 'nosniff');
        assert.match(String(res.headers['content-disposition']), /^inline; filename="digits.txt"/);
        assert.ok(!Number.isNaN(Date.parse(lastModified)));
      });

      it('answers HEAD with the headers and no body', async () => {
        const res = await t.app.inject({
          method: 'HEAD',
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: auth(alice),
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-length'], '10');
        assert.equal(res.body, '');
      });

      it('answers 304 to a matching If-None-Match or a current If-Modified-Since', async () => {
        const r1 = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: { ...auth(alice), 'if-none-match': etag },
        });
        assert.equal(r1.statusCode, 304);
        assert.equal(r1.body, '');
        assert.equal(r1.headers.etag, etag);
        const r2 = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: { ...auth(alice), 'if-none-match': '"other"' },
        });
        assert.equal(r2.statusCode, 200);
        const r3 = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: { ...auth(alice), 'if-modified-since': lastModified },
        });
        assert.equal(r3.statusCode, 304);
        const r4 = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: {
            ...auth(alice),
            'if-modified-since': new Date(Date.parse(lastModified) - 60_000).toUTCString(),
          },
        });
        assert.equal(r4.statusCode, 200);
      });

      it('answers a single range with 206 and Content-Range, including open and suffix ranges', async () => {
        const cases: [string, string, string][] = [
          ['bytes=2-5', '2345', 'bytes 2-5/10'],
          ['bytes=7-', '789', 'bytes 7-9/10'],
          ['bytes=-3', '789', 'bytes 7-9/10'],
          ['bytes=8-100', '89', 'bytes 8-9/10'],
        ];
        for (const [range, body, contentRange] of cases) {
          const res = await t.app.inject({
            url: `/storage/o/user/${ALICE}/digits.txt`,
            headers: { ...auth(alice), range },
          });
          assert.equal(res.statusCode, 206, range);
          assert.equal(res.body, body, range);
          assert.equal(res.headers['content-range'], contentRange, range);
          assert.equal(res.headers['content-length'], String(body.length), range);
        }
      });

      it('answers 416 with Content-Range */size to an unsatisfiable range', async () => {
        for (const range of ['bytes=10-', 'bytes=50-60', 'bytes=-0']) {
          const res = await t.app.inject({
            url: `/storage/o/user/${ALICE}/digits.txt`,
            headers: { ...auth(alice), range },
          });
          assert.equal(res.statusCode, 416, range);
          assert.equal(res.headers['content-range'], 'bytes */10', range);
          assert.equal(res.json().code, 'RANGE_NOT_SATISFIABLE');
        }
      });

      it('ignores malformed, multiple and stale (If-Range) ranges and sends everything', async () => {
        for (const headers of [
          { range: 'bytes=5-2' },
          { range: 'bytes=0-1,4-5' },
          { range: 'items=0-1' },
          { range: 'bytes=1-2', 'if-range': '"stale"' },
        ]) {
          const res = await t.app.inject({
            url: `/storage/o/user/${ALICE}/digits.txt`,
            headers: { ...auth(alice), ...headers },
          });
          assert.equal(res.statusCode, 200, JSON.stringify(headers));
          assert.equal(res.body, '0123456789');
        }
      });

      it("refuses another user's file (403) and serves it with the right ?token=", async () => {
        const meta = (
          await t.app.inject({ url: `/storage/m/user/${ALICE}/digits.txt`, headers: auth(alice) })
        ).json();
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/digits.txt`, headers: auth(bob) })).statusCode,
          403,
        );
        assert.equal((await t.app.inject({ url: `/storage/o/user/${ALICE}/digits.txt` })).statusCode, 403);
        const withToken = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt?token=${meta.Metadata.token}`,
        });
        assert.equal(withToken.statusCode, 200);
        assert.equal(withToken.body, '0123456789');
        assert.equal(withToken.headers['cache-control'], 'private, no-cache');
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/digits.txt?token=wrong` })).statusCode,
          403,
        );
      });

      it('answers 404 for a missing file to those allowed to read it, 403 to others', async () => {
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/nope.txt`, headers: auth(alice) })).statusCode,
          404,
        );
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/nope.txt`, headers: auth(bob) })).statusCode,
          403,
        );
        assert.equal((await t.app.inject({ url: '/storage/o/public/nope.txt' })).statusCode, 404);
      });

      it('marks files anyone may read as publicly cacheable', async () => {
        await upload('/storage/o/public/open.txt', 'open', { 'x-admin-secret': ADMIN });
        const res = await t.app.inject({ url: '/storage/o/public/open.txt' });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['cache-control'], 'public, max-age=3600');
      });

      it('serves HTML, SVG, XML and JavaScript as attachments under nosniff and a sandbox CSP', async () => {
        const files: [string, string, string][] = [
          ['page.html', 'text/html', '<html><script>alert(1)</script></html>'],
          [
            'img.svg',
            'image/svg+xml',
            '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
          ],
          ['feed.xml', 'application/xml', '<?xml version="1.0"?><a/>'],
          ['app.js', 'text/javascript', 'alert(1)'],
        ];
        for (const [name, type, data] of files) {
          await upload(`/storage/o/public/${name}`, data, { 'x-admin-secret': ADMIN }, type);
          const res = await t.app.inject({ url: `/storage/o/public/${name}` });
          assert.equal(res.statusCode, 200, name);
          assert.equal(res.headers['content-type'], type, name);
          assert.match(String(res.headers['content-disposition']), /^attachment; /, name);
          assert.equal(res.headers['x-content-type-options'], 'nosniff', name);
          assert.match(String(res.headers['content-security-policy']), /sandbox/, name);
          assert.match(String(res.headers['content-security-policy']), /default-src 'none'/, name);
        }
      });
    });

    describe('metadata', () => {
      it('answers the exact metadata object for a file', async () => {
        const up = (await upload(`/storage/o/user/${ALICE}/m.txt`, 'meta', auth(alice))).json();
        const res = await t.app.inject({ url: `/storage/m/user/${ALICE}/m.txt`, headers: auth(alice) });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(res.body, JSON.stringify(up));
      });

      it('answers 401 "expired" to a token it accepted before, once the token has expired', async () => {
        await upload(`/storage/o/user/${ALICE}/exp.txt`, 'e', auth(alice));
        const token = await accessToken(t, ALICE);
        const url = `/storage/m/user/${ALICE}/exp.txt`;
        assert.equal((await t.app.inject({ url, headers: auth(token) })).statusCode, 200);
        const back = t.clock.now();
        try {
          t.clock.advance(t.config.JWT_EXPIRES_IN * 60_000);
          const res = await t.app.inject({ url, headers: auth(token) });
          assert.equal(res.statusCode, 401);
          assert.match(String(res.headers['www-authenticate']), /access token expired/);
        } finally {
          t.clock.set(back);
        }
        assert.equal((await t.app.inject({ url, headers: auth(token) })).statusCode, 200);
      });

      it("lists only the folder (trailing-slash prefix, not user/<id>2/), recursively filtered by each file's own rules", async () => {
        const carol = await accessToken(t, LIST_A);
        await upload(`/storage/o/user/${LIST_A}/1.txt`, '1', auth(carol));
        await upload(`/storage/o/user/${LIST_A}/2.txt`, '22', auth(carol));
        // A sibling folder whose name starts with this one's (stored by the admin: it is no user's id).
        await upload(`/storage/o/user/${LIST_A}2/x.txt`, 'x', { 'x-admin-secret': ADMIN });
        // A deeper file matches no entry of the default rules, so only the admin can see it.
        await t.app.inject({
          method: 'POST',
          url: `/storage/o/user/${LIST_A}/deep/3.txt`,
          payload: '333',
          headers: { 'x-admin-secret': ADMIN, 'content-type': 'text/plain' },
        });
        const res = await t.app.inject({ url: `/storage/m/user/${LIST_A}/`, headers: auth(carol) });
        assert.equal(res.statusCode, 200);
        assert.deepEqual(
          res.json().map((m: { key: string }) => m.key),
          [`user/${LIST_A}/1.txt`, `user/${LIST_A}/2.txt`],
        );
        const admin = await t.app.inject({
          url: `/storage/m/user/${LIST_A}/`,
          headers: { 'x-admin-secret': ADMIN },
        });
        assert.deepEqual(
          admin.json().map((m: { key: string }) => m.key),
          [`user/${LIST_A}/1.txt`, `user/${LIST_A}/2.txt`, `user/${LIST_A}/deep/3.txt`],
        );
        assert.equal(
          (await t.app.inject({ url: `/storage/m/user/${LIST_A}/`, headers: auth(bob) })).statusCode,
          403,
        );
        assert.equal((await t.app.inject({ url: '/storage/m/user/' })).statusCode, 403);
        assert.deepEqual(
          (
            await t.app.inject({
              url: `/storage/m/user/${EMPTY_USER}/`,
              headers: auth(await accessToken(t, EMPTY_USER)),
            })
          ).json(),
          [],
        );
      });

      it('rotates the token on DELETE /storage/m/<file> under the write rules, invalidating old links', async () => {
        const up = (await upload(`/storage/o/user/${ALICE}/rot.txt`, 'r', auth(alice))).json();
        assert.equal(
          (
            await t.app.inject({
              method: 'DELETE',
              url: `/storage/m/user/${ALICE}/rot.txt`,
              headers: auth(bob),
            })
          ).statusCode,
          403,
        );
        const res = await t.app.inject({
          method: 'DELETE',
          url: `/storage/m/user/${ALICE}/rot.txt`,
          headers: auth(alice),
        });
        assert.equal(res.statusCode, 204);
        const now = (
          await t.app.inject({ url: `/storage/m/user/${ALICE}/rot.txt`, headers: auth(alice) })
        ).json();
        assert.notEqual(now.Metadata.token, up.Metadata.token);
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/rot.txt?token=${up.Metadata.token}` }))
            .statusCode,
          403,
        );
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ALICE}/rot.txt?token=${now.Metadata.token}` }))
            .statusCode,
          200,
        );
      });

      it('revokes the token on POST /storage/m/<file> with the admin secret only', async () => {
        const up = (await upload(`/storage/o/user/${ALICE}/rev.txt`, 'r', auth(alice))).json();
        const url = `/storage/m/user/${ALICE}/rev.txt`;
        const owner = await t.app.inject({
          method: 'POST',
          url,
          payload: { action: 'revoke-token' },
          headers: auth(alice),
        });
        assert.equal(owner.statusCode, 403);
        assert.equal(owner.json().code, 'INCORRECT_ACCESS_TOKEN');
        assert.match(owner.json().message, /^revoke-token needs the admin secret/);
        const wrong = await t.app.inject({
          method: 'POST',
          url,
          payload: { action: 'revoke-token' },
          headers: { 'x-admin-secret': 'nope' },
        });
        assert.equal(wrong.statusCode, 403);
        const unknown = await t.app.inject({
          method: 'POST',
          url,
          payload: { action: 'rename' },
          headers: { 'x-admin-secret': 'nope' },
        });
        assert.equal(unknown.statusCode, 400);
        const ok = await t.app.inject({
          method: 'POST',
          url,
          payload: { action: 'revoke-token' },
          headers: { 'x-admin-secret': ADMIN },
        });
        assert.equal(ok.statusCode, 200);
        assert.notEqual(ok.json().Metadata.token, up.Metadata.token);
        assert.equal(ok.json().ContentLength, 1);
        const missing = await t.app.inject({
          method: 'POST',
          url: `/storage/m/user/${ALICE}/none.txt`,
          payload: { action: 'revoke-token' },
          headers: { 'x-admin-secret': ADMIN },
        });
        assert.equal(missing.statusCode, 404);
      });
    });

    describe('zip', () => {
      it('streams a folder of 100 files as a zip that unzips to the exact bytes', async () => {
        const owner = await accessToken(t, ZIPPER);
        const files = new Map<string, Buffer>();
        for (let i = 0; i < 100; i++) {
          const data = i % 2 ? randomBytes(100 + i * 37) : Buffer.from(`text file ${i}\n`.repeat(i + 1));
          const key = `user/${ZIPPER}/f${String(i).padStart(3, '0')}.bin`;
          files.set(key, data);
          const res = await t.app.inject({
            method: 'POST',
            url: `/storage/o/${key}`,
            payload: data,
            headers: { ...auth(owner), 'content-type': 'application/octet-stream' },
          });
          assert.equal(res.statusCode, 200);
        }
        const res = await t.app.inject({ url: `/storage/o/user/${ZIPPER}/`, headers: auth(owner) });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'application/zip');
        assert.ok(
          String(res.headers['content-disposition']).startsWith(`attachment; filename="${ZIPPER}.zip"`),
        );
        const entries = await unzip(res.rawPayload);
        assert.equal(entries.size, 100);
        for (const [key, data] of files) assert.ok(entries.get(key)?.equals(data), key);
      });

      it('refuses the zip of a folder the caller may not list', async () => {
        assert.equal(
          (await t.app.inject({ url: `/storage/o/user/${ZIPPER}/`, headers: auth(bob) })).statusCode,
          403,
        );
        const head = await t.app.inject({
          method: 'HEAD',
          url: `/storage/o/user/${ZIPPER}/`,
          headers: auth(bob),
        });
        assert.equal(head.statusCode, 403);
      });

      it('survives a client that leaves in the middle of a zip', async () => {
        const owner = await accessToken(t, ZIPPER);
        await new Promise<void>((resolve, reject) => {
          const req = http.get(`${base}/storage/o/user/${ZIPPER}/`, { headers: auth(owner) }, (res) => {
            assert.equal(res.statusCode, 200);
            res.once('data', () => {
              req.destroy();
              resolve();
            });
          });
          req.on('error', (err: NodeJS.ErrnoException) =>
            err.code === 'ECONNRESET' ? resolve() : reject(err),
          );
        });
        await new Promise((r) => setTimeout(r, 200));
        const again = await t.app.inject({ url: `/storage/o/user/${ZIPPER}/`, headers: auth(owner) });
        assert.equal(again.statusCode, 200);
        assert.equal((await unzip(again.rawPayload)).size, 100);
      });

      it('answers HEAD on a folder with the zip headers and no body', async () => {
        const owner = await accessToken(t, ZIPPER);
        const res = await t.app.inject({
          method: 'HEAD',
          url: `/storage/o/user/${ZIPPER}/`,
          headers: auth(owner),
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'application/zip');
        assert.equal(res.body, '');
      });
    });

    describe('delete', () => {
      it('answers 204 and removes the file, then 404', async () => {
        await upload(`/storage/o/user/${ALICE}/del.txt`, 'x', auth(alice));
        assert.equal(
          (
            await t.app.inject({
              method: 'DELETE',
              url: `/storage/o/user/${ALICE}/del.txt`,
              headers: auth(bob),
            })
          ).statusCode,
          403,
        );
        const res = await t.app.inject({
          method: 'DELETE',
          url: `/storage/o/user/${ALICE}/del.txt`,
          headers: auth(alice),
        });
        assert.equal(res.statusCode, 204);
        assert.equal(res.body, '');
        assert.equal(
          (await t.app.inject({ url: `/storage/m/user/${ALICE}/del.txt`, headers: auth(alice) })).statusCode,
          404,
        );
        assert.equal(
          (
            await t.app.inject({
              method: 'DELETE',
              url: `/storage/o/user/${ALICE}/del.txt`,
              headers: auth(alice),
            })
          ).statusCode,
          404,
        );
      });
    });

    describe('keys', () => {
      it('decodes percent-escapes once and keeps case', async () => {
        const res = await upload('/storage/o/public/My%20File%C3%A9.TXT', 'x', { 'x-admin-secret': ADMIN });
        assert.equal(res.json().key, 'public/My Fileé.TXT');
        assert.equal((await t.app.inject({ url: '/storage/o/public/My%20Fileé.TXT' })).statusCode, 200);
        assert.equal((await t.app.inject({ url: '/storage/o/public/my%20fileé.txt' })).statusCode, 404);
      });

      const bad = [
        `/storage/o/public/../user/${ALICE}/hello.txt`,
        `/storage/o/public/%2E%2E/user/${ALICE}/hello.txt`,
        '/storage/o/public/a/%2e/b',
        '/storage/o/public//a',
        '/storage/o/public/a%5Cb',
        '/storage/o/public/a%00b',
        '/storage/o/public/a%0Ab',
        '/storage/o/public/a%E9b',
        '/storage/o/public/a%zz',
        '/storage/o/public/..',
        '/storage/o//public/a',
      ];
      // Over a real socket: inject() (like browsers) would normalise the dot segments before sending.
      for (const url of bad) {
        it(`refuses ${url} with 400 on every method`, async () => {
          for (const method of ['GET', 'HEAD', 'DELETE', 'POST'] as const) {
            const res = await rawRequest(
              base,
              method,
              url,
              { 'x-admin-secret': ADMIN, 'content-type': 'text/plain' },
              'x',
            );
            assert.equal(res.status, 400, `${method} ${url}`);
          }
        });
      }
    });

    describe('admin secret', () => {
      it('bypasses the rules when it matches the configured secret', async () => {
        const res = await t.app.inject({
          url: `/storage/o/user/${ALICE}/digits.txt`,
          headers: { 'x-admin-secret': ADMIN },
        });
        assert.equal(res.statusCode, 200);
        assert.equal(
          (
            await t.app.inject({
              url: `/storage/o/user/${ALICE}/digits.txt`,
              headers: { 'x-admin-secret': `${ADMIN}x` },
            })
          ).statusCode,
          403,
        );
      });
    });
  });
}

describe('storage without an admin secret', () => {
  let t: TestApp;
  before(async () => {
    t = await buildStorageApp('fs', undefined, { HASURA_GRAPHQL_ADMIN_SECRET: '' });
  });
  after(() => t.close());

  it('grants no bypass to an empty or missing x-admin-secret header (HBP D3)', async () => {
    const owner = await accessToken(t, ALICE);
    const mp = multipartBody([{ name: 'file', filename: 'a', type: 'text/plain', data: 'x' }]);
    await t.app.inject({
      method: 'POST',
      url: `/storage/o/user/${ALICE}/a.txt`,
      payload: mp.payload,
      headers: { ...mp.headers, authorization: `Bearer ${owner}` },
    });
    for (const headers of [{}, { 'x-admin-secret': '' }, { 'x-admin-secret': 'undefined' }]) {
      assert.equal((await t.app.inject({ url: `/storage/o/user/${ALICE}/a.txt`, headers })).statusCode, 403);
      assert.equal(
        (await t.app.inject({ method: 'DELETE', url: `/storage/o/user/${ALICE}/a.txt`, headers })).statusCode,
        403,
      );
      const rev = await t.app.inject({
        method: 'POST',
        url: `/storage/m/user/${ALICE}/a.txt`,
        payload: { action: 'revoke-token' },
        headers,
      });
      assert.equal(rev.statusCode, 403);
    }
  });
});

describe('storage with a custom rules file', () => {
  it('uses STORAGE_RULES_PATH and its folder rules', async () => {
    const dir = (await import('../helpers/app.ts')).tempDir();
    const file = path.join(dir, 'rules.yaml');
    writeFileSync(file, "paths:\n  /docs/:name:\n    read: 'true'\n    create: 'resource.size < 5'\n");
    const t = await buildStorageApp('fs', undefined, { STORAGE_RULES_PATH: file });
    try {
      const small = await t.app.inject({
        method: 'POST',
        url: '/storage/o/docs/a',
        payload: 'abc',
        headers: { 'content-type': 'text/plain' },
      });
      assert.equal(small.statusCode, 200);
      // Multipart gives no size up front: the rule is settled once the bytes are in, and nothing is kept.
      const mp = multipartBody([{ name: 'file', filename: 'b', type: 'text/plain', data: 'abcdefgh' }]);
      const big = await t.app.inject({
        method: 'POST',
        url: '/storage/o/docs/b',
        payload: mp.payload,
        headers: mp.headers,
      });
      assert.equal(big.statusCode, 403);
      assert.equal((await t.app.inject({ url: '/storage/o/docs/b' })).statusCode, 404);
      assert.equal((await t.app.inject({ url: '/storage/o/public/x' })).statusCode, 403);
    } finally {
      await t.close();
    }
  });

  it('refuses to start on a broken rules file, naming the line', async () => {
    const dir = (await import('../helpers/app.ts')).tempDir();
    const file = path.join(dir, 'rules.yaml');
    writeFileSync(file, "paths:\n  /docs/:name:\n    read: 'name ==== 1'\n");
    const database = await createTestDatabase('pglite');
    const config = configFrom({ DATA_DIR: dir, LOG_LEVEL: 'silent', STORAGE_RULES_PATH: file });
    try {
      await assert.rejects(
        createContext(config, { log: pino({ level: 'silent' }), db: database.db }),
        (err: Error) => {
          assert.match(
            err.message,
            new RegExp(
              `^Invalid configuration:\\n  - ${file.replace(/[/.]/g, '\\$&')}:3: path "/docs/:name" rule "read"`,
            ),
          );
          return true;
        },
      );
    } finally {
      await database.drop();
    }
  });
});

describe('storage switched off', () => {
  it('answers 404 on every /storage route when STORAGE_ENABLED is false', async () => {
    const t = await buildStorageApp('fs', undefined, { STORAGE_ENABLED: false });
    try {
      for (const [method, url] of [
        ['GET', '/storage/o/public/a'],
        ['POST', '/storage/o/public/a'],
        ['GET', '/storage/m/public/'],
      ] as const) {
        const res = await t.app.inject({ method, url });
        assert.equal(res.statusCode, 404);
      }
      assert.equal((await t.app.inject({ url: '/health/ready' })).statusCode, 204);
    } finally {
      await t.close();
    }
  });
});
