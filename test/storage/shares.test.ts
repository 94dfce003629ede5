/**
 * Share links (POST/GET/DELETE /storage/shares, GET /storage/s/{id}) on each database and each backend:
 * making, listing and revoking links; downloads as GET /storage/o serves them; expiry, revocation, the
 * download limit under concurrent downloads, a deleted file, another user's link; bad input; the link id
 * kept out of the logs; and revocation across two instances sharing PostgreSQL.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deleteUser } from '../../src/auth/accounts-store.ts';
import { openPostgres } from '../../src/db/database.ts';
import { accessToken, createAccount, newEmail } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp, tempDir } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { captureLog } from '../helpers/log.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { runsHere } from '../helpers/requirements.ts';
import { photo } from '../images/fixtures.ts';
import { buildStorageApp, dbBackendPairs, type S3Peer, startS3rver, userIdFor } from './helpers.ts';

/** A signed-in user with an account (links belong to accounts where this service issues the tokens). */
async function newUser(t: TestApp, name: string): Promise<{ id: string; token: string }> {
  const { userId } = await createAccount(t, { email: newEmail(name) });
  return { id: userId, token: await accessToken(t, userId) };
}

const SERVER_URL = 'https://files.example.com';
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

async function upload(t: TestApp, key: string, data: string | Buffer, token: string, type = 'text/plain') {
  const mp = multipartBody([{ name: 'file', filename: path.basename(key), type, data }]);
  const res = await t.app.inject({
    method: 'POST',
    url: `/storage/o/${key}`,
    payload: mp.payload,
    headers: { ...mp.headers, ...auth(token) },
  });
  assert.equal(res.statusCode, 200, res.body);
}

function share(t: TestApp, token: string, body: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url: '/storage/shares', headers: auth(token), payload: body });
}

async function made(t: TestApp, token: string, body: Record<string, unknown>) {
  const res = await share(t, token, body);
  assert.equal(res.statusCode, 201, res.body);
  return res.json() as {
    id: string;
    url: string;
    handle: string;
    path: string;
    expires_at: string;
    max_downloads: number | null;
  };
}

const download = (t: TestApp, id: string, headers: Record<string, string> = {}, query = '') =>
  t.app.inject({ method: 'GET', url: `/storage/s/${id}${query}`, headers });

async function listed(t: TestApp, token: string) {
  const res = await t.app.inject({ method: 'GET', url: '/storage/shares', headers: auth(token) });
  assert.equal(res.statusCode, 200, res.body);
  return {
    raw: res.body,
    items: res.json() as { handle: string; path: string; downloads: number; status: string }[],
  };
}

for (const [db, backend] of dbBackendPairs()) {
  describe(`share links [${db}, ${backend}]`, () => {
    let t: TestApp;
    let alice: string;
    let bob: string;
    let ALICE: string;
    let BOB: string;
    let file: string;
    /** The app on a real socket: concurrent downloads over real connections. */
    let base: string;
    const capture = captureLog('debug');

    before(async () => {
      t = await buildStorageApp(
        backend,
        peer,
        { SERVER_URL, RATE_LIMIT_ENABLED: false, LOG_LEVEL: 'debug' },
        db,
        { log: capture.log },
      );
      ({ id: ALICE, token: alice } = await newUser(t, 'alice'));
      ({ id: BOB, token: bob } = await newUser(t, 'bob'));
      file = `user/${ALICE}/report.txt`;
      await upload(t, file, 'quarterly numbers', alice);
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => t.close());

    it('makes a link that serves the file without a credential, and lists it without its id', async () => {
      const s = await made(t, alice, { path: file, max_downloads: 3 });
      assert.match(s.id, /^[A-Za-z0-9_-]{32}$/);
      assert.equal(s.url, `${SERVER_URL}/storage/s/${s.id}`);
      assert.equal(s.path, file);
      assert.equal(s.max_downloads, 3);
      const expires = Date.parse(s.expires_at) - t.clock.now().getTime();
      assert.equal(expires, t.config.STORAGE_SHARE_DEFAULT_SECONDS * 1000);

      const res = await download(t, s.id);
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, 'quarterly numbers');
      assert.match(String(res.headers['content-type']), /^text\/plain/);
      assert.equal(res.headers['cache-control'], 'private, no-cache');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.ok(res.headers.etag);

      const list = await listed(t, alice);
      const item = list.items.find((i) => i.handle === s.handle) as Record<string, unknown>;
      assert.deepEqual(Object.keys(item).sort(), [
        'created_at',
        'downloads',
        'expires_at',
        'handle',
        'max_downloads',
        'path',
        'status',
      ]);
      assert.deepEqual(
        [item['path'], item['downloads'], item['max_downloads'], item['status'], item['expires_at']],
        [file, 1, 3, 'active', s.expires_at],
      );
      assert.ok(!list.raw.includes(s.id), 'the listing re-reveals the link id');
      // Bob's listing does not show Alice's links.
      assert.equal((await listed(t, bob)).items.length, 0);
    });

    it('revokes a link by its handle: 204, then 410 at once, and gone from the listing', async () => {
      const s = await made(t, alice, { path: file });
      assert.equal((await download(t, s.id)).statusCode, 200);
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/storage/shares/${s.handle}`,
        headers: auth(alice),
      });
      assert.equal(del.statusCode, 204);
      const gone = await download(t, s.id);
      assert.equal(gone.statusCode, 410);
      assert.equal(gone.json().code, 'SHARE_LINK_GONE');
      assert.equal((await t.app.inject({ method: 'HEAD', url: `/storage/s/${s.id}` })).statusCode, 410);
      assert.ok(!(await listed(t, alice)).items.some((i) => i.handle === s.handle));
      // Revoking again: no such live link.
      const again = await t.app.inject({
        method: 'DELETE',
        url: `/storage/shares/${s.handle}`,
        headers: auth(alice),
      });
      assert.equal(again.statusCode, 404);
    });

    it('revokes a link by its id too', async () => {
      const s = await made(t, alice, { path: file });
      const del = await t.app.inject({
        method: 'DELETE',
        url: `/storage/shares/${s.id}`,
        headers: auth(alice),
      });
      assert.equal(del.statusCode, 204);
      assert.equal((await download(t, s.id)).statusCode, 410);
    });

    it("answers 404 to DELETE of another user's link, by id or handle, and the link keeps working", async () => {
      const s = await made(t, alice, { path: file });
      for (const ref of [s.id, s.handle]) {
        const res = await t.app.inject({
          method: 'DELETE',
          url: `/storage/shares/${ref}`,
          headers: auth(bob),
        });
        assert.equal(res.statusCode, 404);
        assert.equal(res.json().code, 'SHARE_LINK_NOT_FOUND');
      }
      for (const ref of ['not-a-link', '00000000-0000-4000-8000-000000000000', 'A'.repeat(32)]) {
        const res = await t.app.inject({
          method: 'DELETE',
          url: `/storage/shares/${ref}`,
          headers: auth(alice),
        });
        assert.equal(res.statusCode, 404);
      }
      assert.equal((await download(t, s.id)).statusCode, 200);
    });

    it('answers 404 to an unknown or malformed link id', async () => {
      for (const id of ['A'.repeat(32), 'short', `${'b'.repeat(40)}`]) {
        const res = await download(t, id);
        assert.equal(res.statusCode, 404);
        assert.equal(res.json().code, 'SHARE_LINK_NOT_FOUND');
      }
    });

    it('answers 410 once the link has expired', async () => {
      const s = await made(t, alice, { path: file, expires_in: 60 });
      assert.equal(Date.parse(s.expires_at) - t.clock.now().getTime(), 60_000);
      assert.equal((await download(t, s.id)).statusCode, 200);
      t.clock.advance(59_000);
      assert.equal((await download(t, s.id)).statusCode, 200);
      t.clock.advance(1_000);
      const res = await download(t, s.id);
      assert.equal(res.statusCode, 410);
      assert.equal(res.json().code, 'SHARE_LINK_GONE');
      const item = (await listed(t, alice)).items.find((i) => i.handle === s.handle);
      assert.equal(item?.status, 'expired');
      // Kept 30 days after it stopped working (410), then forgotten when its owner makes a link (404).
      t.clock.advance(30 * 86_400_000 - 1_000);
      // Access tokens made before are long expired by this clock.
      alice = await accessToken(t, ALICE);
      bob = await accessToken(t, BOB);
      await made(t, alice, { path: file });
      assert.equal((await download(t, s.id)).statusCode, 410);
      t.clock.advance(2_000);
      alice = await accessToken(t, ALICE);
      bob = await accessToken(t, BOB);
      await made(t, alice, { path: file });
      assert.equal((await download(t, s.id)).statusCode, 404);
      assert.ok(!(await listed(t, alice)).items.some((i) => i.handle === s.handle));
    });

    it('serves exactly max_downloads of 20 concurrent downloads', async () => {
      const s = await made(t, alice, { path: file, max_downloads: 5 });
      {
        const answers = await Promise.all(
          Array.from({ length: 20 }, async () => {
            const res = await fetch(`${base}/storage/s/${s.id}`);
            return { status: res.status, body: await res.text() };
          }),
        );
        const ok = answers.filter((a) => a.status === 200);
        assert.equal(ok.length, 5, JSON.stringify(answers.map((a) => a.status)));
        assert.ok(ok.every((a) => a.body === 'quarterly numbers'));
        assert.ok(answers.filter((a) => a.status !== 200).every((a) => a.status === 410));
      }
      const item = (await listed(t, alice)).items.find((i) => i.handle === s.handle);
      assert.deepEqual([item?.downloads, item?.status], [5, 'used_up']);
    });

    it('counts a range as a download, and neither HEAD nor 304', async () => {
      const s = await made(t, alice, { path: file, max_downloads: 2 });
      const head = await t.app.inject({ method: 'HEAD', url: `/storage/s/${s.id}` });
      assert.equal(head.statusCode, 200);
      assert.equal(head.body, '');
      const first = await download(t, s.id, { range: 'bytes=0-8' });
      assert.equal(first.statusCode, 206);
      assert.equal(first.body, 'quarterly');
      assert.equal(first.headers['content-range'], 'bytes 0-8/17');
      const etag = String(first.headers.etag);
      const notModified = await download(t, s.id, { 'if-none-match': etag });
      assert.equal(notModified.statusCode, 304);
      assert.equal((await download(t, s.id, { range: 'bytes=100-' })).statusCode, 416);
      let item = (await listed(t, alice)).items.find((i) => i.handle === s.handle);
      assert.equal(item?.downloads, 1);
      const rest = await download(t, s.id, { range: 'bytes=9-' });
      assert.equal(rest.statusCode, 206);
      assert.equal(rest.body, ' numbers');
      item = (await listed(t, alice)).items.find((i) => i.handle === s.handle);
      assert.deepEqual([item?.downloads, item?.status], [2, 'used_up']);
      // Used up: even a conditional request is refused.
      assert.equal((await download(t, s.id, { 'if-none-match': etag })).statusCode, 410);
    });

    it('answers 410 once the file is deleted, also after a new file is put at its path', async () => {
      const key = `user/${ALICE}/to-delete.txt`;
      await upload(t, key, 'soon gone', alice);
      const s = await made(t, alice, { path: key });
      assert.equal((await download(t, s.id)).statusCode, 200);
      const del = await t.app.inject({ method: 'DELETE', url: `/storage/o/${key}`, headers: auth(alice) });
      assert.equal(del.statusCode, 204);
      assert.equal((await download(t, s.id)).statusCode, 410);
      await upload(t, key, 'a different file', alice);
      assert.equal((await download(t, s.id)).statusCode, 410);
    });

    it('answers 410 when the file vanished from the store behind the service', async () => {
      const key = `user/${ALICE}/vanishing.txt`;
      await upload(t, key, 'here now', alice);
      const s = await made(t, alice, { path: key, max_downloads: 10 });
      assert.ok(await t.ctx.storage?.objects.delete(key));
      for (const headers of [{}, { range: 'bytes=0-1' }] as Record<string, string>[]) {
        const res = await download(t, s.id, headers);
        assert.equal(res.statusCode, 410);
        assert.equal(res.json().code, 'SHARE_LINK_GONE');
      }
    });

    it('serves a transformed image with the image parameters', async () => {
      const key = `user/${ALICE}/photo.png`;
      await upload(t, key, await photo(64, 48), alice, 'image/png');
      const s = await made(t, alice, { path: key, max_downloads: 1 });
      const res = await download(t, s.id, {}, '?w=16&f=webp');
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.headers['content-type'], 'image/webp');
      assert.equal(res.rawPayload.subarray(8, 12).toString(), 'WEBP');
      // That was the one download.
      assert.equal((await download(t, s.id, {}, '?w=16&f=webp')).statusCode, 410);
    });

    it('serves active content as a download, as GET /storage/o does', async () => {
      const key = `user/${ALICE}/page.html`;
      await upload(t, key, '<script>alert(1)</script>', alice, 'text/html');
      const s = await made(t, alice, { path: key });
      const res = await download(t, s.id);
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-disposition']), /^attachment;/);
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.match(String(res.headers['content-security-policy']), /sandbox/);
    });

    it('refuses to make a link to a file the storage rules do not let the caller read', async () => {
      const res = await share(t, bob, { path: file });
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().code, 'FORBIDDEN');
      assert.equal((await listed(t, bob)).items.length, 0);
    });

    it('answers 404 for a missing file the caller could read, and 401 without a credential', async () => {
      const missing = await share(t, alice, { path: `user/${ALICE}/nothing.txt` });
      assert.equal(missing.statusCode, 404);
      const anonymous = await t.app.inject({
        method: 'POST',
        url: '/storage/shares',
        payload: { path: file },
      });
      assert.equal(anonymous.statusCode, 401);
      assert.equal((await t.app.inject({ method: 'GET', url: '/storage/shares' })).statusCode, 401);
    });

    it('answers 400, never 500, to bad share parameters, and stores nothing', async () => {
      const before = (await listed(t, alice)).items.length;
      const bad: [Record<string, unknown>, string][] = [
        [{ path: file, expires_in: 0 }, 'VALIDATION'],
        [{ path: file, expires_in: -5 }, 'VALIDATION'],
        [{ path: file, expires_in: 1.5 }, 'VALIDATION'],
        [{ path: file, expires_in: t.config.STORAGE_SHARE_MAX_SECONDS + 1 }, 'VALIDATION'],
        [{ path: file, expires_in: 1e308 }, 'VALIDATION'],
        [{ path: file, expires_in: '60' }, 'VALIDATION'],
        [{ path: file, max_downloads: 0 }, 'VALIDATION'],
        [{ path: file, max_downloads: -1 }, 'VALIDATION'],
        [{ path: file, max_downloads: 2 ** 31 }, 'VALIDATION'],
        [{ path: `user/${ALICE}/` }, 'INVALID_KEY'],
        [{ path: `user/${ALICE}/../${BOB}/x.txt` }, 'INVALID_KEY'],
        [{ path: 'a\u0000b' }, 'INVALID_KEY'],
        [{ path: '/' }, 'INVALID_KEY'],
        [{ path: '' }, 'VALIDATION'],
        [{}, 'VALIDATION'],
        [{ path: file, extra: 1 }, 'VALIDATION'],
      ];
      for (const [body, code] of bad) {
        const res = await share(t, alice, body);
        assert.equal(res.statusCode, 400, `${JSON.stringify(body)}: ${res.body}`);
        assert.equal(res.json().code, code, JSON.stringify(body));
      }
      const notJson = await t.app.inject({
        method: 'POST',
        url: '/storage/shares',
        headers: { ...auth(alice), 'content-type': 'application/json' },
        payload: '{"path":',
      });
      assert.equal(notJson.statusCode, 400);
      assert.equal((await listed(t, alice)).items.length, before);
      // The longest lifetime allowed is accepted.
      const longest = await made(t, alice, {
        path: `/${file}`,
        expires_in: t.config.STORAGE_SHARE_MAX_SECONDS,
      });
      assert.equal(longest.path, file);
    });

    it("deletes an account's links with the account", async () => {
      const { userId } = await createAccount(t, { email: newEmail('sharer') });
      const token = await accessToken(t, userId);
      const key = `user/${userId}/mine.txt`;
      await upload(t, key, 'mine', token);
      const s = await made(t, token, { path: key });
      assert.equal((await download(t, s.id)).statusCode, 200);
      await deleteUser(t.ctx.db, userId);
      assert.equal((await download(t, s.id)).statusCode, 404);
    });

    it("makes a disabled account's links answer 410, and refuses it new ones", async () => {
      const { id, token } = await newUser(t, 'disabled');
      const key = `user/${id}/mine.txt`;
      await upload(t, key, 'mine', token);
      const s = await made(t, token, { path: key });
      await t.ctx.db.query(
        'test-disable',
        'UPDATE auth.accounts SET disabled_at = now() WHERE user_id = $1',
        [id],
      );
      assert.equal((await download(t, s.id)).statusCode, 410);
      const again = await share(t, token, { path: key });
      assert.equal(again.statusCode, 403);
      assert.equal(again.json().code, 'ACCOUNT_DISABLED');
    });

    it('never writes a link id to the log, on creation, download or revocation', async () => {
      const s = await made(t, alice, { path: file });
      await download(t, s.id);
      await download(t, `${s.id}/extra`);
      await t.app.inject({ method: 'DELETE', url: `/storage/shares/${s.id}`, headers: auth(alice) });
      await download(t, s.id);
      const text = capture.text();
      assert.ok(capture.lines.some((l) => JSON.stringify(l).includes('/storage/s/[redacted]')));
      assert.ok(!text.includes(s.id), 'a link id was logged');
    });
  });
}

describe('share links where another service issues the tokens (AUTH_ENABLED=false)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildStorageApp('fs', undefined, {
      AUTH_ENABLED: false,
      JWT_ALGORITHM: 'HS256',
      JWT_KEY: 'test-secret-key-of-at-least-32-bytes-long',
    });
  });
  after(() => t.close());

  it("makes a link for a token's user that has no account here", async () => {
    const user = userIdFor('external-user');
    const token = await accessToken(t, user);
    await upload(t, `user/${user}/a.txt`, 'external', token);
    const s = await made(t, token, { path: `user/${user}/a.txt` });
    assert.equal((await download(t, s.id)).body, 'external');
    assert.equal((await listed(t, token)).items.length, 1);
  });
});

describe('share link revocation across two instances sharing PostgreSQL', {
  skip: !runsHere('postgres', 'share links across two instances (PostgreSQL)'),
}, () => {
  let a: TestApp;
  let b: TestApp;
  const dataDir = tempDir('gatehouse-shares-two-');
  before(async () => {
    const shared = await createTestDatabase('postgres');
    // One DATA_DIR: the same folder store and the same signing keys for both.
    const settings = { RATE_LIMIT_ENABLED: false, DATA_DIR: dataDir };
    a = await buildTestApp('postgres', settings, { database: shared });
    const pool = openPostgres(shared.url as string, 5);
    b = await buildTestApp('postgres', settings, {
      database: { db: pool, url: shared.url, drop: () => pool.close() },
      clock: a.clock,
    });
  });
  after(async () => {
    await b?.close();
    await a?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a link revoked on one instance is refused by the other at once', async () => {
    const { id: ALICE, token: alice } = await newUser(a, 'alice');
    const key = `user/${ALICE}/both.txt`;
    await upload(a, key, 'on both', alice);
    const s = await made(a, alice, { path: key });
    assert.equal((await download(b, s.id)).statusCode, 200);
    const del = await a.app.inject({
      method: 'DELETE',
      url: `/storage/shares/${s.handle}`,
      headers: auth(alice),
    });
    assert.equal(del.statusCode, 204);
    assert.equal((await download(b, s.id)).statusCode, 410);
    const item = (await listed(b, alice)).items.find((i) => i.handle === s.handle);
    assert.equal(item, undefined);
  });
});
