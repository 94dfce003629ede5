/**
 * tus-js-client (the client Uppy uses) uploads 50 MB in 5 MB chunks to the real service process, which is
 * stopped and started again in the middle (SIGTERM), then killed in the middle of a PATCH (SIGKILL) and
 * started again: the same client resumes each time from the last durable offset (a chunk boundary; the
 * upload is never created anew), and the completed file downloads byte for byte. Both databases and both
 * backends: PGlite with the folder, PostgreSQL with S3 (s3rver). One service process per scenario.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import * as tus from 'tus-js-client';
import { openPglite } from '../../src/db/database.ts';
import { HS_KEY, newEmail } from '../helpers/accounts.ts';
import { tempDir } from '../helpers/app.ts';
import { createTestDatabase, migratedPgliteDump, type TestDatabase } from '../helpers/db.ts';
import { killIfRunning, REPO_ROOT, runNode, type ServiceProcess } from '../helpers/process.ts';
import { dbBackendPairs, type S3Peer, startS3rver, uniqueBucket } from './helpers.ts';

const MAIN = path.join(REPO_ROOT, 'src/main.ts');
const SIZE = 50_000_000;
const CHUNK = 5_000_000;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

for (const [dbKind, backend] of dbBackendPairs()) {
  describe(`TUS resume across restarts [${dbKind}, ${backend}]`, () => {
    const dataDir = tempDir('gatehouse-tus-resume-');
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

    it('resumes after a stop and start, and after a SIGKILL mid-PATCH; the file downloads byte for byte', {
      timeout: 240_000,
    }, async () => {
      const port = await freePort();
      const env: Record<string, string> = {
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'info',
        JWT_ALGORITHM: 'HS256',
        JWT_KEY: HS_KEY,
        RATE_LIMIT_ENABLED: 'false',
        AUTO_ACTIVATE_NEW_USERS: 'true',
        ARGON2_MEMORY_COST: '1024',
        ARGON2_TIME_COST: '1',
      };
      if (dbKind === 'postgres') {
        database = await createTestDatabase('postgres');
        env['DATABASE_URL'] = String(database.url);
      } else {
        const seed = await openPglite(path.join(dataDir, 'db'), await migratedPgliteDump());
        await seed.close();
      }
      if (backend === 's3') {
        peer = await startS3rver();
        Object.assign(env, {
          S3_ENDPOINT: peer.endpoint,
          S3_BUCKET: uniqueBucket(),
          S3_ACCESS_KEY_ID: 'S3RVER',
          S3_SECRET_ACCESS_KEY: 'S3RVER',
          S3_SSL_ENABLED: 'false',
        });
      }
      const start = async () => {
        service = runNode(MAIN, env);
        return service.listening;
      };
      const restart = async (signal: NodeJS.Signals) => {
        const s = service as ServiceProcess;
        s.child.kill(signal);
        await s.exited;
        await start();
      };
      const base = await start();

      // A real user, signed in: the upload is theirs, under the default rules' /user/<id>/.
      const reg = await fetch(`${base}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: newEmail('tus'), password: 'correct horse battery', cookie: false }),
      });
      const session = (await reg.json()) as { jwt_token: string; user: { id: string } };
      assert.equal(reg.status, 200);
      const authorization = `Bearer ${session.jwt_token}`;
      const key = `user/${session.user.id}/movie.bin`;

      const data = randomBytes(SIZE);
      const requests: string[] = [];
      const resumedAt: number[] = [];
      let phase: 'first' | 'stopping' | 'restarted' | 'killing' | 'killed' = 'first';
      let killedWhileSent = 0;
      await new Promise<void>((resolve, reject) => {
        new tus.Upload(data, {
          endpoint: `${base}/storage/uploads`,
          chunkSize: CHUNK,
          headers: { authorization },
          metadata: { path: key, filetype: 'application/octet-stream', filename: 'movie.bin' },
          retryDelays: Array.from({ length: 60 }, () => 500),
          onBeforeRequest: (req) => {
            requests.push(`${phase} ${req.getMethod()}`);
          },
          onAfterResponse: (req, res) => {
            if (req.getMethod() === 'HEAD' && res.getStatus() === 200)
              resumedAt.push(Number(res.getHeader('Upload-Offset')));
          },
          onChunkComplete: (_size, accepted) => {
            if (phase === 'first' && accepted >= 3 * CHUNK) {
              phase = 'stopping';
              restart('SIGTERM').then(() => {
                phase = 'restarted';
              }, reject);
            }
          },
          onProgress: (sent) => {
            // In the seventh chunk's PATCH, as soon as its body has begun to go out (the client reports
            // progress at most every 100 ms: the first report of a chunk comes with its first write).
            if (phase === 'restarted' && sent > 6 * CHUNK && sent < 7 * CHUNK) {
              phase = 'killing';
              killedWhileSent = sent;
              restart('SIGKILL').then(() => {
                phase = 'killed';
              }, reject);
            }
          },
          onError: reject,
          onSuccess: () => resolve(),
        }).start();
      });

      assert.equal(phase, 'killed', `both interruptions happened (${requests.join(', ')})`);
      // One creation: every interruption was resumed, never started over.
      assert.equal(requests.filter((r) => r.endsWith('POST')).length, 1, requests.join(', '));
      assert.ok(
        resumedAt.length >= 2,
        `the client asked for the offset after each interruption: ${resumedAt}`,
      );
      // After the kill: the last durable offset, a chunk boundary at or before what had been sent.
      const afterKill = resumedAt[resumedAt.length - 1] as number;
      assert.equal(afterKill % CHUNK, 0, `resumed at ${afterKill}`);
      assert.ok(
        afterKill >= 3 * CHUNK && afterKill <= 7 * CHUNK,
        `resumed at ${afterKill} (killed at ${killedWhileSent} sent)`,
      );

      const r = await fetch(`${base}/storage/o/${key}`, { headers: { authorization } });
      assert.equal(r.status, 200);
      const got = Buffer.from(await r.arrayBuffer());
      assert.equal(got.length, SIZE);
      assert.equal(sha256(got), sha256(data));
      if (backend === 'fs') {
        // The upload's file became the object: nothing is left beside it.
        const left = readdirSync(path.join(dataDir, 'uploads'));
        assert.deepEqual(left, [], `left in DATA_DIR/uploads: ${left.join(', ')}`);
      }
    });
  });
}
