import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { hbpRules } from './helpers.ts';

/** POSTs raw bytes to a storage path (HBP's rules make /public writable by anyone). */
async function put(t: TestApp, key: string, bytes: Buffer) {
  const res = await t.app.inject({
    method: 'POST',
    url: `/storage/o/${key}`,
    payload: bytes,
    headers: { 'content-type': 'application/octet-stream' },
  });
  assert.equal(res.statusCode, 200, res.body);
}

describe('storage faults over a real socket [fs]', () => {
  let t: TestApp;
  let base: string;
  before(async () => {
    t = await buildTestApp('pglite', { RATE_LIMIT_ENABLED: false, ...hbpRules() });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  });
  after(() => t.close());

  it('survives a file deleted while its folder is being zipped: the download is cut short, the service answers on', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 7);
    for (let i = 0; i < 12; i++) await put(t, `public/zipfault/f${String(i).padStart(2, '0')}`, chunk);
    const outcome = await new Promise<{ status: number; complete: boolean }>((resolve, reject) => {
      http
        .get(`${base}/storage/o/public/zipfault/`, (res) => {
          // Read nothing at first, so the service is still zipping when the last file disappears.
          res.pause();
          const status = res.statusCode ?? 0;
          t.app
            .inject({ method: 'DELETE', url: '/storage/o/public/zipfault/f11' })
            .then((del) => {
              assert.equal(del.statusCode, 204);
              res.on('data', () => {});
              res.on('end', () => resolve({ status, complete: res.complete }));
              res.on('error', () => resolve({ status, complete: false }));
              res.on('aborted', () => resolve({ status, complete: false }));
              res.resume();
            })
            .catch(reject);
        })
        .on('error', () => resolve({ status: 200, complete: false }));
    });
    assert.equal(outcome.status, 200);
    assert.equal(outcome.complete, false, 'the zip is cut short rather than silently missing a file');
    const health = await t.app.inject({ method: 'GET', url: '/health' });
    assert.equal(health.statusCode, 204, 'the process is still serving');
  });

  it('answers 400 to a multipart body without a boundary or cut short, and stores nothing', async () => {
    const noBoundary = await t.app.inject({
      method: 'POST',
      url: '/storage/o/public/mp-bad',
      payload: 'garbage',
      headers: { 'content-type': 'multipart/form-data' },
    });
    assert.equal(noBoundary.statusCode, 400, noBoundary.body);
    const cut = await t.app.inject({
      method: 'POST',
      url: '/storage/o/public/mp-cut',
      payload:
        '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhalf a file',
      headers: { 'content-type': 'multipart/form-data; boundary=XYZ' },
    });
    assert.equal(cut.statusCode, 400, cut.body);
    for (const key of ['mp-bad', 'mp-cut']) {
      const got = await t.app.inject({ method: 'GET', url: `/storage/m/public/${key}` });
      assert.equal(got.statusCode, 404);
    }
  });

  it('never lets an empty ?token= stand for a file token', async () => {
    await put(t, 'public/tok/readme', Buffer.from('x'));
    const res = await t.app.inject({ method: 'GET', url: '/storage/o/user/someone/file?token=' });
    assert.equal(res.statusCode, 403);
  });
});
