/**
 * Resumable uploads (TUS 1.0.0) at /storage/uploads, over real HTTP on both databases and both backends:
 * the protocol answers (discovery, creation, creation-with-upload, checksum, termination), the file
 * appearing at once as a plain upload would, an incomplete upload staying invisible (download, listing,
 * zip, its parts' reserved path) until it expires and its parts are removed, attacks by another caller,
 * and every bad input answered with a 4xx that stores nothing. The restart and SIGKILL cases, with
 * tus-js-client against the real service process, are in tus-resume.test.ts.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as tus from 'tus-js-client';
import { accessToken } from '../helpers/accounts.ts';
import type { TestApp } from '../helpers/app.ts';
import { buildStorageApp, dbBackendPairs, type S3Peer, startS3rver, userIdFor } from './helpers.ts';

const ADMIN = 'tus-test-admin-secret';
const V = { 'tus-resumable': '1.0.0' };
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('base64');

function meta(entries: Record<string, string>): string {
  return Object.entries(entries)
    .map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`)
    .join(',');
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

for (const [dbKind, backend] of dbBackendPairs()) {
  describe(`TUS uploads [${dbKind}, ${backend}]`, () => {
    let peer: S3Peer | undefined;
    let t: TestApp;
    let base: string;
    const alice = userIdFor('tus-alice');
    const bob = userIdFor('tus-bob');
    const carol = userIdFor('tus-carol');
    const auth: Record<string, Record<string, string>> = {};

    before(async () => {
      if (backend === 's3') peer = await startS3rver();
      t = await buildStorageApp(
        backend,
        peer,
        {
          HASURA_GRAPHQL_ADMIN_SECRET: ADMIN,
          STORAGE_MAX_UPLOAD_SIZE: 20 * 1024 * 1024,
          STORAGE_QUOTA_BYTES: 12 * 1024 * 1024,
        },
        dbKind,
      );
      base = `${await t.app.listen({ host: '127.0.0.1', port: 0 })}/storage`;
      await t.ctx.storage?.catalog.ready;
      auth['alice'] = { authorization: `Bearer ${await accessToken(t, alice)}` };
      auth['bob'] = { authorization: `Bearer ${await accessToken(t, bob)}` };
      auth['carol'] = { authorization: `Bearer ${await accessToken(t, carol)}` };
      auth['admin'] = { 'x-admin-secret': ADMIN };
      auth['anonymous'] = {};
    });
    after(async () => {
      await t?.close();
      await peer?.close();
    });

    async function call(method: string, url: string, headers: Record<string, string>, body?: Buffer) {
      const r = await fetch(url.startsWith('http') ? url : `${base}${url}`, { method, headers, body });
      return { status: r.status, headers: r.headers, text: await r.text() } satisfies Answer;
    }

    async function create(
      who: string,
      key: string,
      length: number,
      extra: Record<string, string> = {},
      body?: Buffer,
    ): Promise<Answer & { url: string }> {
      const a = await call(
        'POST',
        '/uploads',
        {
          ...V,
          ...auth[who],
          'upload-length': String(length),
          'upload-metadata': meta({ path: key, contentType: 'application/octet-stream' }),
          ...(body ? { 'content-type': 'application/offset+octet-stream' } : {}),
          ...extra,
        },
        body,
      );
      const location = a.headers.get('location') ?? '';
      return { ...a, url: location ? new URL(location, base).toString() : '' };
    }

    const patch = (
      who: string,
      url: string,
      offset: number,
      body: Buffer,
      extra: Record<string, string> = {},
    ) =>
      call(
        'PATCH',
        url,
        {
          ...V,
          ...auth[who],
          'upload-offset': String(offset),
          'content-type': 'application/offset+octet-stream',
          ...extra,
        },
        body,
      );

    const offsetOf = async (who: string, url: string) => {
      const a = await call('HEAD', url, { ...V, ...auth[who] });
      assert.equal(a.status, 200);
      return Number(a.headers.get('upload-offset'));
    };

    const uploadRows = async () =>
      Number(
        (await t.ctx.db.query<{ n: string }>('t', 'SELECT count(*) AS n FROM storage.uploads')).rows[0]?.n,
      );

    it('announces itself on OPTIONS: version, extensions, the upload limit, sha1', async () => {
      const a = await call('OPTIONS', '/uploads', {});
      assert.equal(a.status, 204);
      assert.equal(a.headers.get('tus-version'), '1.0.0');
      assert.equal(a.headers.get('tus-max-size'), String(20 * 1024 * 1024));
      assert.equal(a.headers.get('tus-checksum-algorithm'), 'sha1');
      const ext = (a.headers.get('tus-extension') ?? '').split(',');
      for (const e of ['creation', 'creation-with-upload', 'termination', 'expiration', 'checksum'])
        assert.ok(ext.includes(e), e);
    });

    it('tus-js-client uploads in chunks; the file appears at once, as a plain upload (type, token, rules)', async () => {
      const data = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(3 * 1024 * 1024)]);
      const key = `user/${alice}/report.pdf`;
      await new Promise<void>((resolve, reject) => {
        new tus.Upload(data, {
          endpoint: `${base}/uploads`,
          chunkSize: 1024 * 1024,
          headers: auth['alice'],
          metadata: { path: key, filetype: 'application/octet-stream', filename: 'report.pdf' },
          retryDelays: [],
          onError: reject,
          onSuccess: () => resolve(),
        }).start();
      });
      const m = await call('GET', `/m/${key}`, auth['alice'] as Record<string, string>);
      assert.equal(m.status, 200, m.text);
      const info = JSON.parse(m.text) as {
        ContentLength: number;
        ContentType: string;
        Metadata: { token: string };
      };
      assert.equal(info.ContentLength, data.length);
      // Sniffed from the bytes, as the plain upload does.
      assert.equal(info.ContentType, 'application/pdf');
      assert.match(info.Metadata.token, /^[0-9a-f-]{36}$/);
      // The token works as for any file (HBP's validToken rule), and the bytes are exact.
      const r = await fetch(`${base}/o/${key}?token=${info.Metadata.token}`);
      assert.equal(r.status, 200);
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(data));
      // No upload left holding parts.
      const left = await t.ctx.db.query<{ completed_at: Date | null }>(
        't',
        'SELECT completed_at FROM storage.uploads WHERE key = $1',
        [key],
      );
      assert.ok(left.rows.every((row) => row.completed_at !== null));
    });

    it('checksum: a matching sha1 is stored, a mismatch answers 460 and stores nothing', async () => {
      const data = randomBytes(300_000);
      const c = await create('alice', `user/${alice}/checked.bin`, data.length);
      assert.equal(c.status, 201, c.text);
      const first = data.subarray(0, 100_000);
      let a = await patch('alice', c.url, 0, first, { 'upload-checksum': `sha1 ${sha1(first)}` });
      assert.equal(a.status, 204, a.text);
      assert.equal(a.headers.get('upload-offset'), '100000');
      const second = data.subarray(100_000);
      a = await patch('alice', c.url, 100_000, second, { 'upload-checksum': `sha1 ${sha1(randomBytes(8))}` });
      assert.equal(a.status, 460, a.text);
      assert.equal(JSON.parse(a.text).code, 'UPLOAD_CHECKSUM_MISMATCH');
      assert.equal(await offsetOf('alice', c.url), 100_000);
      a = await patch('alice', c.url, 100_000, second, { 'upload-checksum': `sha1 ${sha1(second)}` });
      assert.equal(a.status, 204, a.text);
      const r = await fetch(`${base}/o/user/${alice}/checked.bin`, { headers: auth['alice'] });
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(data));
    });

    it('creation-with-upload completes in one request; termination removes an upload and its parts', async () => {
      const whole = randomBytes(70_000);
      const c = await create('alice', `user/${alice}/one-shot.bin`, whole.length, {}, whole);
      assert.equal(c.status, 201, c.text);
      assert.equal(c.headers.get('upload-offset'), String(whole.length));
      const r = await fetch(`${base}/o/user/${alice}/one-shot.bin`, { headers: auth['alice'] });
      assert.equal(r.status, 200);
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(whole));

      const partial = await create('alice', `user/${alice}/dropped.bin`, 200_000, {}, randomBytes(50_000));
      assert.equal(partial.status, 201, partial.text);
      assert.equal(partial.headers.get('upload-offset'), '50000');
      const id = partial.url.slice(partial.url.lastIndexOf('/') + 1);
      assert.ok(((await t.ctx.storage?.tus.partsOf(id)) ?? 0) > 0);
      const d = await call('DELETE', partial.url, { ...V, ...auth['alice'] });
      assert.equal(d.status, 204, d.text);
      assert.equal((await call('HEAD', partial.url, { ...V, ...auth['alice'] })).status, 404);
      assert.equal(await t.ctx.storage?.tus.partsOf(id), 0);
      assert.equal(
        (await call('GET', `/o/user/${alice}/dropped.bin`, auth['alice'] as Record<string, string>)).status,
        404,
      );
    });

    it('an incomplete upload is invisible (download, listing, zip, its parts) and expires with its parts', async () => {
      const key = `user/${alice}/half.bin`;
      const c = await create('admin', key, 400_000);
      assert.equal(c.status, 201, c.text);
      assert.equal((await patch('admin', c.url, 0, randomBytes(150_000))).status, 204);
      const id = c.url.slice(c.url.lastIndexOf('/') + 1);
      assert.ok(((await t.ctx.storage?.tus.partsOf(id)) ?? 0) > 0);

      assert.equal((await call('GET', `/o/${key}`, auth['admin'] as Record<string, string>)).status, 404);
      assert.equal((await call('GET', `/m/${key}`, auth['admin'] as Record<string, string>)).status, 404);
      // The whole store as the admin sees it: the parts are in no listing and no zip.
      const list = await call('GET', '/m/', auth['admin'] as Record<string, string>);
      assert.equal(list.status, 200, list.text);
      assert.ok(!list.text.includes('.gatehouse-uploads'), list.text);
      assert.ok(!list.text.includes('half.bin'));
      const zip = await fetch(`${base}/o/`, { headers: auth['admin'] });
      const zipBytes = Buffer.from(await zip.arrayBuffer());
      assert.ok(!zipBytes.includes('.gatehouse-uploads'));
      assert.ok(!zipBytes.includes('half.bin'));
      // Their reserved path is refused outright, even to the admin.
      for (const [method, p] of [
        ['GET', `/o/.gatehouse-uploads/${id}/0000000000000000`],
        ['GET', '/m/.gatehouse-uploads/'],
        ['POST', '/o/.gatehouse-uploads/x'],
        ['DELETE', `/o/.gatehouse-uploads/${id}/0000000000000000`],
      ] as const) {
        const a = await call(
          method,
          p,
          { ...auth['admin'], 'content-type': 'text/plain' },
          method === 'POST' ? Buffer.from('x') : undefined,
        );
        assert.equal(a.status, 400, `${method} ${p}: ${a.text}`);
      }

      // STORAGE_UPLOAD_EXPIRY later, the sweep removes the upload: parts, row, and the URL answers 404.
      const expiresHeader = c.headers.get('upload-expires');
      assert.ok(expiresHeader && Date.parse(expiresHeader) > Date.now());
      t.clock.advance(t.config.STORAGE_UPLOAD_EXPIRY + 1000);
      assert.equal((await call('HEAD', c.url, { ...V, ...auth['admin'] })).status, 404);
      assert.ok(((await t.ctx.storage?.tus.sweep()) ?? 0) >= 1);
      assert.equal(await t.ctx.storage?.tus.partsOf(id), 0);
      const row = await t.ctx.db.query('t', 'SELECT 1 FROM storage.uploads WHERE id = $1', [id]);
      assert.equal(row.rows.length, 0);
      if (backend === 'fs') assert.equal(existsSync(path.join(t.dataDir, 'uploads', `${id}.part`)), false);
      assert.equal((await call('GET', `/o/${key}`, auth['admin'] as Record<string, string>)).status, 404);
      // Back to now: the other tests' access tokens would have expired.
      t.clock.advance(-(t.config.STORAGE_UPLOAD_EXPIRY + 1000));
    });

    it("another caller's HEAD, PATCH and DELETE find nothing (404), and change nothing", async () => {
      const c = await create('alice', `user/${alice}/mine.bin`, 100_000);
      assert.equal(c.status, 201, c.text);
      assert.equal((await patch('alice', c.url, 0, randomBytes(10_000))).status, 204);
      for (const who of ['bob', 'anonymous', 'admin']) {
        for (const [method, run] of [
          ['HEAD', () => call('HEAD', c.url, { ...V, ...auth[who] })],
          ['PATCH', () => patch(who, c.url, 10_000, randomBytes(1000))],
          ['DELETE', () => call('DELETE', c.url, { ...V, ...auth[who] })],
        ] as const) {
          const a = await run();
          assert.equal(a.status, 404, `${who} ${method}: ${a.text}`);
        }
      }
      // The same 404 as for an id that never existed: nothing tells them apart.
      const unknown = await call('HEAD', `${base}/uploads/${'0'.repeat(32)}`, { ...V, ...auth['bob'] });
      assert.equal(unknown.status, 404);
      assert.equal(await offsetOf('alice', c.url), 10_000);
      // Bob cannot start one in Alice's folder either: the rules' write, with his identity.
      const before = await uploadRows();
      const theirs = await create('bob', `user/${alice}/planted.bin`, 10);
      assert.equal(theirs.status, 403, theirs.text);
      assert.equal(await uploadRows(), before);
    });

    it('quota: a declared length over what is left is refused at creation (413), and termination gives it back', async () => {
      const MiB = 1024 * 1024;
      const first = await create('carol', `user/${carol}/a.bin`, 8 * MiB);
      assert.equal(first.status, 201, first.text);
      const rows = await uploadRows();
      // 8 MiB reserved by the first: 8 more would pass the 12 MiB quota, though nothing is stored yet.
      const second = await create('carol', `user/${carol}/b.bin`, 8 * MiB);
      assert.equal(second.status, 413, second.text);
      assert.equal(JSON.parse(second.text).code, 'QUOTA_EXCEEDED');
      assert.equal(await uploadRows(), rows, 'the refused creation left no upload');
      // Other users are not held back by Carol's reservation.
      const bobs = await create('bob', `user/${bob}/b.bin`, 8 * MiB);
      assert.equal(bobs.status, 201, bobs.text);
      assert.equal((await call('DELETE', bobs.url, { ...V, ...auth['bob'] })).status, 204);
      // Terminated, the first upload's reservation goes: the same length fits again.
      assert.equal((await call('DELETE', first.url, { ...V, ...auth['carol'] })).status, 204);
      const third = await create('carol', `user/${carol}/b.bin`, 8 * MiB);
      assert.equal(third.status, 201, third.text);
      assert.equal((await call('DELETE', third.url, { ...V, ...auth['carol'] })).status, 204);
    });

    it('bad input: 412, 409, 404, 413, 415, 400 — never a 500, and a refused request stores nothing', async () => {
      const key = `user/${alice}/bad.bin`;
      const before = await uploadRows();
      const refusals: [string, () => Promise<Answer>, number][] = [
        [
          'creation without Tus-Resumable',
          () =>
            call('POST', '/uploads', {
              ...auth['alice'],
              'upload-length': '5',
              'upload-metadata': meta({ path: key }),
            }),
          412,
        ],
        [
          'creation with another version',
          () =>
            call('POST', '/uploads', {
              ...auth['alice'],
              'tus-resumable': '0.2.2',
              'upload-length': '5',
              'upload-metadata': meta({ path: key }),
            }),
          412,
        ],
        ['Upload-Length over the limit', () => create('alice', key, 20 * 1024 * 1024 + 1), 413],
        [
          'no Upload-Length',
          () => call('POST', '/uploads', { ...V, ...auth['alice'], 'upload-metadata': meta({ path: key }) }),
          400,
        ],
        [
          'Upload-Defer-Length',
          () =>
            call('POST', '/uploads', {
              ...V,
              ...auth['alice'],
              'upload-defer-length': '1',
              'upload-metadata': meta({ path: key }),
            }),
          400,
        ],
        ['a negative Upload-Length', () => create('alice', key, -1), 400],
        [
          'no path in Upload-Metadata',
          () =>
            call('POST', '/uploads', {
              ...V,
              ...auth['alice'],
              'upload-length': '5',
              'upload-metadata': meta({ filetype: 'text/plain' }),
            }),
          400,
        ],
        [
          'malformed Upload-Metadata',
          () =>
            call('POST', '/uploads', {
              ...V,
              ...auth['alice'],
              'upload-length': '5',
              'upload-metadata': 'path ***not base64***',
            }),
          400,
        ],
        ['a folder path', () => create('alice', `user/${alice}/folder/`, 5), 400],
        ['a path with ..', () => create('alice', `user/${alice}/../x`, 5), 400],
        ['the reserved path', () => create('admin', '.gatehouse-uploads/x', 5), 400],
        ['Upload-Concat', () => create('alice', key, 5, { 'upload-concat': 'partial' }), 400],
        ['creation-with-upload over its length', () => create('alice', key, 5, {}, randomBytes(50)), 413],
      ];
      for (const [what, run, status] of refusals) {
        const a = await run();
        assert.equal(a.status, status, `${what}: ${a.text}`);
        const body = JSON.parse(a.text) as { statusCode: number; code: string };
        assert.equal(body.statusCode, status, what);
        assert.equal(typeof body.code, 'string', what);
      }
      assert.equal(await uploadRows(), before, 'a refused creation leaves no upload');

      const c = await create('alice', key, 1000);
      assert.equal(c.status, 201, c.text);
      assert.equal((await patch('alice', c.url, 0, randomBytes(100))).status, 204);
      const onUpload: [string, () => Promise<Answer>, number][] = [
        [
          'PATCH without Tus-Resumable',
          () =>
            call(
              'PATCH',
              c.url,
              { ...auth['alice'], 'upload-offset': '100', 'content-type': 'application/offset+octet-stream' },
              randomBytes(10),
            ),
          412,
        ],
        [
          'HEAD without Tus-Resumable',
          () => call('HEAD', c.url, auth['alice'] as Record<string, string>),
          412,
        ],
        [
          'DELETE without Tus-Resumable',
          () => call('DELETE', c.url, auth['alice'] as Record<string, string>),
          412,
        ],
        ['an Upload-Offset behind', () => patch('alice', c.url, 0, randomBytes(10)), 409],
        ['an Upload-Offset ahead', () => patch('alice', c.url, 500, randomBytes(10)), 409],
        [
          'no Upload-Offset',
          () =>
            call(
              'PATCH',
              c.url,
              { ...V, ...auth['alice'], 'content-type': 'application/offset+octet-stream' },
              randomBytes(10),
            ),
          400,
        ],
        [
          'a wrong Content-Type',
          () => patch('alice', c.url, 100, randomBytes(10), { 'content-type': 'text/plain' }),
          415,
        ],
        ['a body past Upload-Length', () => patch('alice', c.url, 100, randomBytes(2000)), 413],
        [
          'an unsupported checksum algorithm',
          () =>
            patch('alice', c.url, 100, randomBytes(10), {
              'upload-checksum': 'md5 AAAAAAAAAAAAAAAAAAAAAA==',
            }),
          400,
        ],
        [
          'a malformed checksum',
          () => patch('alice', c.url, 100, randomBytes(10), { 'upload-checksum': 'sha1' }),
          400,
        ],
        [
          'a PATCH to an unknown upload',
          () => patch('alice', `${base}/uploads/${randomBytes(16).toString('hex')}`, 0, randomBytes(10)),
          404,
        ],
        [
          'a PATCH to a malformed id',
          () => patch('alice', `${base}/uploads/..%2F..%2Fetc`, 0, randomBytes(10)),
          404,
        ],
      ];
      for (const [what, run, status] of onUpload) {
        const a = await run();
        assert.equal(a.status, status, `${what}: ${a.text}`);
        if (a.text) assert.equal(JSON.parse(a.text).statusCode, status, what);
      }
      assert.equal(await offsetOf('alice', c.url), 100, 'no refused PATCH moved the offset');
    });
  });
}
