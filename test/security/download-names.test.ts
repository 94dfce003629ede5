/**
 * A file's name cannot disguise what it is when it is downloaded: a key holding a right-to-left override
 * (U+202E) or another bidirectional or control character (`invoice\u202Efdp.exe` shows as
 * `invoiceexe.pdf`) is offered under a name without it, in `Content-Disposition` and as a zip entry.
 * Over a real socket, on both backends and databases.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import yauzl from 'yauzl';
import { entryName } from '../../src/storage/routes/send-zip.ts';
import type { TestApp } from '../helpers/app.ts';
import { buildStorageApp, dbBackendPairs, type S3Peer, startS3rver, userIdFor } from '../storage/helpers.ts';

const ADMIN = 'download-names-admin-secret';
const OWNER = userIdFor('download-names');
const RLO = '\u202E';
/** Every character a name must not carry, each in a name of its own. */
const DISGUISES = ['\u202A', '\u202B', '\u202C', '\u202D', RLO, '\u2066', '\u2067', '\u2068', '\u2069'];
// (C0 and C1 controls never reach a name: a key holding one is refused with 400.)
const MARKS = ['\u200E', '\u200F', '\u061C', '\u2028', '\u2029'];
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

function unzipNames(buf: Buffer): Promise<string[]> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true, decodeStrings: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const names: string[] = [];
      zip.on('entry', (entry: yauzl.Entry) => {
        names.push(entry.fileName);
        zip.readEntry();
      });
      zip.on('end', () => resolve(names));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

/** The name a browser saves under: `filename*` decoded (RFC 6266 prefers it), and the ASCII fallback. */
function offeredNames(header: string | null): { exact: string; fallback: string } {
  const exact = /filename\*=UTF-8''([^;]+)/.exec(header ?? '')?.[1];
  const fallback = /filename="([^"]*)"/.exec(header ?? '')?.[1];
  assert.ok(exact !== undefined && fallback !== undefined, `no filename in ${header}`);
  return { exact: decodeURIComponent(exact), fallback };
}

let peer: S3Peer;
before(async () => {
  peer = await startS3rver();
});
after(() => peer.close());

for (const [db, backend] of dbBackendPairs()) {
  describe(`download names [${backend}, ${db}]`, () => {
    let t: TestApp;
    let base: string;
    const folder = `user/${OWNER}/names`;
    const upload = async (name: string) => {
      const res = await fetch(`${base}/storage/o/${folder}/${encodeURIComponent(name)}`, {
        method: 'POST',
        headers: { 'x-admin-secret': ADMIN, 'content-type': 'application/octet-stream' },
        body: 'MZ not really a program',
      });
      assert.equal(res.status, 200, await res.text());
    };

    before(async () => {
      t = await buildStorageApp(backend, peer, { HASURA_GRAPHQL_ADMIN_SECRET: ADMIN }, db);
      base = await t.app.listen({ host: '127.0.0.1', port: 0 });
      await upload(`invoice${RLO}fdp.exe`);
      for (const [i, c] of [...DISGUISES, ...MARKS].entries()) await upload(`n${i}${c}gpj.exe`);
      await upload(`.${RLO}.`);
    });
    after(() => t.close());

    it('offers a file named with U+202E under its name without the override', async () => {
      const res = await fetch(`${base}/storage/o/${folder}/${encodeURIComponent(`invoice${RLO}fdp.exe`)}`, {
        headers: { 'x-admin-secret': ADMIN },
      });
      assert.equal(res.status, 200);
      const { exact, fallback } = offeredNames(res.headers.get('content-disposition'));
      assert.equal(exact, 'invoicefdp.exe');
      assert.equal(fallback, 'invoicefdp.exe');
    });

    it('drops every bidirectional mark, override, isolate and control character from download names', async () => {
      for (const [i, c] of [...DISGUISES, ...MARKS].entries()) {
        const res = await fetch(`${base}/storage/o/${folder}/${encodeURIComponent(`n${i}${c}gpj.exe`)}`, {
          headers: { 'x-admin-secret': ADMIN },
        });
        assert.equal(res.status, 200);
        const label = `U+${c.codePointAt(0)?.toString(16).toUpperCase()}`;
        const { exact, fallback } = offeredNames(res.headers.get('content-disposition'));
        assert.equal(exact, `n${i}gpj.exe`, label);
        assert.equal(fallback, `n${i}gpj.exe`, label);
      }
    });

    it('names zip entries without them, and never as . or ..', async () => {
      const res = await fetch(`${base}/storage/o/${folder}/`, { headers: { 'x-admin-secret': ADMIN } });
      assert.equal(res.status, 200);
      const names = await unzipNames(Buffer.from(await res.arrayBuffer()));
      assert.equal(names.length, 2 + DISGUISES.length + MARKS.length);
      for (const name of names) {
        assert.doesNotMatch(name, UNSAFE, JSON.stringify(name));
        for (const segment of name.split('/')) assert.ok(segment !== '.' && segment !== '..', name);
      }
      assert.ok(names.includes(`${folder}/invoicefdp.exe`), names.join(', '));
      assert.ok(names.includes(`${folder}/_`), names.join(', '));
    });
  });
}

describe('zip entry names', () => {
  it('keep ordinary keys as they are', () => {
    assert.equal(entryName('user/a/My File é.txt'), 'user/a/My File é.txt');
  });
});
