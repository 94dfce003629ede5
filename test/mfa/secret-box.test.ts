import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { SecretBox, SecretBoxError } from '../../src/auth/mfa/secret-box.ts';
import { configFrom } from '../../src/config.ts';
import { tempDir } from '../helpers/app.ts';

const secret = Buffer.from('0123456789abcdef0123');

describe('SecretBox', () => {
  it('seals into gh1:<keyid>:<iv>:<ct>:<tag> and opens back', () => {
    const box = new SecretBox('a server secret of some length');
    const sealed = box.seal(secret, 'account-1');
    const parts = sealed.split(':');
    assert.equal(parts.length, 5);
    assert.equal(parts[0], 'gh1');
    assert.equal(parts[1], box.currentKeyId);
    assert.equal(Buffer.from(parts[2] as string, 'base64url').length, 12);
    assert.equal(Buffer.from(parts[4] as string, 'base64url').length, 16);
    assert.deepEqual(box.open(sealed, 'account-1'), secret);
    assert.ok(box.isCurrent(sealed));
  });

  it('uses a fresh IV each time, so equal secrets seal differently', () => {
    const box = new SecretBox('a server secret of some length');
    assert.notEqual(box.seal(secret, 'a'), box.seal(secret, 'a'));
  });

  it('refuses to open under another context (a sealed secret copied to another account)', () => {
    const box = new SecretBox('a server secret of some length');
    assert.throws(() => box.open(box.seal(secret, 'account-1'), 'account-2'), SecretBoxError);
  });

  it('refuses a tampered ciphertext, a truncated tag, and garbage', () => {
    const box = new SecretBox('a server secret of some length');
    const [v, id, iv, ct, tag] = box.seal(secret, 'a').split(':') as string[];
    const flipped = Buffer.from(ct as string, 'base64url');
    flipped[0] = (flipped[0] as number) ^ 1;
    assert.throws(
      () => box.open([v, id, iv, flipped.toString('base64url'), tag].join(':'), 'a'),
      SecretBoxError,
    );
    const short = Buffer.from(tag as string, 'base64url')
      .subarray(0, 4)
      .toString('base64url');
    assert.throws(() => box.open([v, id, iv, ct, short].join(':'), 'a'), SecretBoxError);
    assert.throws(() => box.open('JBSWY3DPEHPK3PXP', 'a'), SecretBoxError);
    assert.throws(() => box.open('gh1:x:y', 'a'), SecretBoxError);
  });

  it('opens values sealed under a previous key and reports them as not current (rotation)', () => {
    const old = new SecretBox('the old server secret value');
    const sealed = old.seal(secret, 'a');
    const rotated = new SecretBox('the new server secret value', ['the old server secret value']);
    assert.notEqual(rotated.currentKeyId, old.currentKeyId);
    assert.deepEqual(rotated.open(sealed, 'a'), secret);
    assert.equal(rotated.isCurrent(sealed), false);
    assert.ok(rotated.isCurrent(rotated.seal(secret, 'a')));
  });

  it('cannot open values sealed under a key it no longer holds', () => {
    const sealed = new SecretBox('the old server secret value').seal(secret, 'a');
    assert.throws(() => new SecretBox('the new server secret value').open(sealed, 'a'), /unknown key/);
  });

  it('refuses secrets shorter than 16 characters', () => {
    assert.throws(() => new SecretBox('short'), SecretBoxError);
  });

  it('generates a secret into DATA_DIR/keys when MFA_ENCRYPTION_KEY is unset, and reuses it', () => {
    const dir = tempDir();
    const config = configFrom({ DATA_DIR: dir });
    const a = SecretBox.fromConfig(config);
    const b = SecretBox.fromConfig(config);
    assert.equal(a.currentKeyId, b.currentKeyId);
    const stored = readFileSync(path.join(dir, 'keys', 'mfa-encryption.secret'), 'utf8').trim();
    assert.equal(new SecretBox(stored).currentKeyId, a.currentKeyId);
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses MFA_ENCRYPTION_KEY when it is set', () => {
    const config = configFrom({ DATA_DIR: '/nonexistent', MFA_ENCRYPTION_KEY: 'configured secret value' });
    assert.equal(
      SecretBox.fromConfig(config).currentKeyId,
      new SecretBox('configured secret value').currentKeyId,
    );
  });
});
