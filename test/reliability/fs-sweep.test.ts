/**
 * The fs backend's start-up sweep, on leftovers laid out as a killed process leaves them: temporary
 * files of a process that is gone are removed whatever their age, a live process's are kept, another
 * host's are kept for an hour; a commit cut off between moving its data in and writing the metadata (or
 * a delete cut off between the two removals) is finished from its marker. (crash.test.ts kills the real
 * process; this places each case exactly.)
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { encodeSegment, FsObjectStore, temporaryFiles } from '../../src/storage/backends/fs.ts';
import { tempDir } from '../helpers/app.ts';

/** The pid of a process that has ended. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(r.stdout);
}

describe('fs store start-up sweep', () => {
  const root = tempDir('gatehouse-sweep-');
  after(() => rmSync(root, { recursive: true, force: true }));

  it('removes what a killed process left and finishes its cut-off commits, keeping what live writers own', async () => {
    const first = new FsObjectStore(root);
    await first.init();
    await first.put('a/kept.txt', Readable.from([Buffer.from('version one')]), {
      contentType: 'text/plain',
      token: 't',
    });
    await first.put('c/gone.txt', Readable.from([Buffer.from('to delete')]), {
      contentType: 'text/plain',
      token: 't',
    });
    await first.close();

    const tmp = path.join(root, 'tmp');
    const host = hostname();
    const dead = `${deadPid()}@${host}`;
    const live = `${process.ppid}@${host}`;
    const file = (name: string, body = 'x', ageMs = 0) => {
      writeFileSync(path.join(tmp, name), body);
      if (ageMs) {
        const t = (Date.now() - ageMs) / 1000;
        utimesSync(path.join(tmp, name), t, t);
      }
      return name;
    };
    const deadUpload = file(`${dead}~${randomUUID()}`);
    const deadSidecar = file(`${dead}~${randomUUID()}.json`);
    const liveUpload = file(`${live}~${randomUUID()}`);
    const otherHostYoung = file(`123@elsewhere.example~${randomUUID()}`);
    const otherHostOld = file(`123@elsewhere.example~${randomUUID()}`, 'x', 2 * 3600_000);

    // A put cut off after moving its data in, before its metadata: the new data file is unreferenced.
    const aDir = path.join(root, 'objects', 'a');
    const orphan = `${encodeSegment('kept.txt')}~${randomUUID()}.data`;
    writeFileSync(path.join(aDir, orphan), 'version two, never committed');
    file(`${dead}~${randomUUID()}.pending`, JSON.stringify({ key: 'a/kept.txt' }));
    // A delete cut off after removing the metadata, before the data.
    const cDir = path.join(root, 'objects', 'c');
    rmSync(path.join(cDir, `${encodeSegment('gone.txt')}~meta.json`));
    file(`${dead}~${randomUUID()}.pending`, JSON.stringify({ key: 'c/gone.txt' }));
    // A live process's commit in progress is not touched.
    mkdirSync(path.join(root, 'objects', 'e'), { recursive: true });
    const liveData = `${encodeSegment('busy.txt')}~${randomUUID()}.data`;
    writeFileSync(path.join(root, 'objects', 'e', liveData), 'being committed');
    const liveMarker = file(`${live}~${randomUUID()}.pending`, JSON.stringify({ key: 'e/busy.txt' }));

    const store = new FsObjectStore(root);
    await store.init();
    try {
      const left = (await temporaryFiles(root)).sort();
      assert.deepEqual(left, [liveMarker, liveUpload, otherHostYoung].sort());
      for (const gone of [deadUpload, deadSidecar, otherHostOld]) assert.ok(!left.includes(gone));

      assert.ok(!existsSync(path.join(aDir, orphan)), 'the uncommitted data file is removed');
      const got = await store.get('a/kept.txt');
      assert.ok(got);
      const chunks: Buffer[] = [];
      for await (const c of got.body) chunks.push(c as Buffer);
      assert.equal(Buffer.concat(chunks).toString(), 'version one', 'the committed version is served');
      assert.equal(readdirSync(aDir).length, 2, 'its metadata and its one data file');

      assert.equal(existsSync(cDir), false, "the deleted object's data file and folder are gone");
      assert.ok(existsSync(path.join(root, 'objects', 'e', liveData)), "a live process's commit is left");
    } finally {
      await store.close();
    }
  });
});
