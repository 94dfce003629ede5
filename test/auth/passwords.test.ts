/** The password-hashing pool: results, malformed hashes, queueing past the thread count, thread priority. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import bcrypt from 'bcryptjs';
import { configuredKind, hashKind, needsRehash, Passwords } from '../../src/auth/passwords.ts';

const config = {
  ARGON2_MEMORY_COST: 1024,
  ARGON2_TIME_COST: 1,
  ARGON2_PARALLELISM: 1,
  PASSWORD_HASH_THREADS: 2,
  PASSWORD_HASH_QUEUE: 0,
};

describe('password hashing', () => {
  const passwords = new Passwords(config);
  after(() => passwords.close());

  it('hashes with the configured argon2id parameters and verifies', async () => {
    const h = await passwords.hash('secret one');
    assert.equal(hashKind(h), configuredKind(config));
    assert.equal(hashKind(h), '$argon2id$v=19$m=1024,t=1,p=1');
    assert.equal(await passwords.verify(h, 'secret one'), true);
    assert.equal(await passwords.verify(h, 'secret two'), false);
    assert.equal(needsRehash(config, h), false);
    assert.equal(needsRehash({ ...config, ARGON2_TIME_COST: 2 }, h), true);
  });

  it('verifies HBP bcrypt hashes and marks them for rehash', async () => {
    const h = bcrypt.hashSync('hbp', 4);
    assert.equal(hashKind(h), 'bcrypt$04');
    assert.equal(await passwords.verify(h, 'hbp'), true);
    assert.equal(await passwords.verify(h, 'nope'), false);
    assert.equal(needsRehash(config, h), true);
  });

  it('never matches a malformed or unknown stored hash', async () => {
    for (const h of ['', 'plain', '$argon2id$v=19$m=1024,t=1,p=1$bad', '$2a$04$short', '$scrypt$x']) {
      assert.equal(await passwords.verify(h, 'plain'), false, h);
    }
    assert.equal(needsRehash(config, 'plain'), false);
  });

  it('queues more jobs than threads and answers each one', async () => {
    const hashes = await Promise.all(Array.from({ length: 7 }, (_, i) => passwords.hash(`pw${i}`)));
    const checks = await Promise.all(hashes.map((h, i) => passwords.verify(h, `pw${i}`)));
    assert.deepEqual(checks, Array(7).fill(true));
    assert.equal(await passwords.verifyDummy('anything'), false);
  });

  it('runs the hashing threads at a lower priority than the event loop', {
    skip: !existsSync('/proc/self/task') && 'needs Linux /proc',
  }, async () => {
    await Promise.all([passwords.hash('a'), passwords.hash('b')]);
    const nice = (tid: string) => {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    };
    const levels = readdirSync('/proc/self/task').map(nice);
    const main = nice(String(process.pid));
    // Unless the whole process was started at a low priority already, the event loop stays above hashing.
    if (main < 10) {
      assert.equal(levels.filter((n) => n === 10).length, 2, `thread nice levels: ${levels}`);
    }
  });
});
