import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { hash } from '@node-rs/argon2';
import { configFrom } from '../../src/config.ts';
import { parseImageParams } from '../../src/storage/images/params.ts';
import { ImageService } from '../../src/storage/images/service.ts';
import { tempDir } from '../helpers/app.ts';
import { photo } from './fixtures.ts';

describe('image transforms under a burst', () => {
  const dir = tempDir('gatehouse-image-load-');
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs at most IMAGE_CONCURRENCY at once while a password hash still gets a thread', async () => {
    const service = new ImageService(
      configFrom({ DATA_DIR: dir, IMAGE_CONCURRENCY: 1, IMAGE_CACHE_MAX_SIZE: 0 }),
    );
    const input = await photo(1200, 800);
    let peakRunning = 0;
    let peakWaiting = 0;
    const sampler = setInterval(() => {
      peakRunning = Math.max(peakRunning, service.queue.stats.running);
      peakWaiting = Math.max(peakWaiting, service.queue.stats.waiting);
    }, 2);
    let burstDone = 0;
    const burst = Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        service.transform(
          {
            key: `burst/${i}.png`,
            etag: `"${i}"`,
            size: input.length,
            open: async () => ({ body: input, etag: `"${i}"` }),
          },
          { params: parseImageParams({ w: String(900 + i), f: 'webp' }) },
        ),
      ),
    ).then((r) => {
      burstDone = performance.now();
      return r;
    });
    // A login's argon2id hash (OWASP parameters) runs on the same libuv pool as sharp.
    await hash('correct horse battery staple', { memoryCost: 19456, timeCost: 2, parallelism: 1 });
    const hashDone = performance.now();
    const results = await burst;
    clearInterval(sampler);
    assert.equal(results.length, 8);
    assert.equal(peakRunning, 1);
    assert.ok(peakWaiting >= 5, `peak waiting ${peakWaiting}`);
    assert.ok(hashDone < burstDone, 'the hash finished only after the whole burst');
  });
});
