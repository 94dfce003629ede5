import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  base32Decode,
  base32Encode,
  generateSecret,
  hotp,
  otpauthUri,
  SECRET_BYTES,
  totp,
  verifyTotp,
} from './totp.ts';

// RFC 6238 Appendix B: seeds are ASCII digits, 8-digit codes.
const SEED_SHA1 = Buffer.from('12345678901234567890');
const SEED_SHA256 = Buffer.from('12345678901234567890123456789012');
const SEED_SHA512 = Buffer.from('1234567890123456789012345678901234567890123456789012345678901234');
const RFC6238: [number, string, string, string][] = [
  [59, '94287082', '46119246', '90693936'],
  [1111111109, '07081804', '68084774', '25091201'],
  [1111111111, '14050471', '67062674', '99943326'],
  [1234567890, '89005924', '91819424', '93441116'],
  [2000000000, '69279037', '90698825', '38618901'],
  [20000000000, '65353130', '77737706', '47863826'],
];

describe('TOTP (RFC 6238)', () => {
  for (const [t, sha1] of RFC6238) {
    it(`gives the RFC 6238 SHA-1 vector ${sha1} at T=${t}`, () => {
      assert.equal(totp(SEED_SHA1, t * 1000, { algorithm: 'sha1', digits: 8, period: 30 }), sha1);
    });
  }

  it('gives the RFC 6238 SHA-256 and SHA-512 vectors', () => {
    for (const [t, , sha256, sha512] of RFC6238) {
      assert.equal(totp(SEED_SHA256, t * 1000, { algorithm: 'sha256', digits: 8, period: 30 }), sha256);
      assert.equal(totp(SEED_SHA512, t * 1000, { algorithm: 'sha512', digits: 8, period: 30 }), sha512);
    }
  });

  it('gives the RFC 4226 Appendix D HOTP values for counters 0 to 9', () => {
    const expected = [
      '755224',
      '287082',
      '359152',
      '969429',
      '338314',
      '254676',
      '287922',
      '162583',
      '399871',
      '520489',
    ];
    assert.deepEqual(
      expected.map((_, i) => hotp(SEED_SHA1, i)),
      expected,
    );
  });

  it('defaults to 6 digits: the last six digits of the 8-digit vector', () => {
    assert.equal(totp(SEED_SHA1, 59_000), '287082');
  });
});

describe('verifyTotp', () => {
  const key = SEED_SHA1;
  const now = 1_111_111_111_000; // step 37037037, 1 s into it
  const step = Math.floor(now / 30_000);

  it('returns the matching step for the current code', () => {
    assert.equal(verifyTotp(key, totp(key, now), now), step);
  });

  it('accepts the previous and the next step (one step of drift each way)', () => {
    assert.equal(verifyTotp(key, totp(key, now - 30_000), now), step - 1);
    assert.equal(verifyTotp(key, totp(key, now + 30_000), now), step + 1);
  });

  it('refuses codes two steps away', () => {
    assert.equal(verifyTotp(key, totp(key, now - 60_000), now), null);
    assert.equal(verifyTotp(key, totp(key, now + 60_000), now), null);
  });

  it('refuses a code whose step is at or before the last accepted step (replay)', () => {
    const code = totp(key, now);
    assert.equal(verifyTotp(key, code, now, { lastUsedStep: step }), null);
    assert.equal(verifyTotp(key, code, now, { lastUsedStep: step + 1 }), null);
    assert.equal(verifyTotp(key, code, now, { lastUsedStep: step - 1 }), step);
  });

  it('refuses codes of the wrong length or with other characters', () => {
    const code = totp(key, now);
    for (const bad of [code.slice(1), `${code}0`, '', ` ${code.slice(1)}`, 'abcdef']) {
      assert.equal(verifyTotp(key, bad, now), null, bad);
    }
  });

  it('refuses the right code computed with another secret', () => {
    assert.equal(verifyTotp(generateSecret(), totp(key, now), now), null);
  });
});

describe('base32 (RFC 4648)', () => {
  const vectors: [string, string][] = [
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ];
  for (const [plain, encoded] of vectors) {
    it(`encodes "${plain}" as "${encoded}" and back`, () => {
      assert.equal(base32Encode(Buffer.from(plain)), encoded);
      assert.equal(base32Decode(encoded).toString(), plain);
    });
  }

  it('decodes lower case, padding and spaces', () => {
    assert.equal(base32Decode('mzxw 6ytb oi======').toString(), 'foobar');
  });

  it('throws on characters outside the alphabet', () => {
    assert.throws(() => base32Decode('MZXW1'));
  });

  it('round-trips random secrets of 160 bits into 32 characters', () => {
    const s = generateSecret();
    assert.equal(s.length, SECRET_BYTES);
    const text = base32Encode(s);
    assert.match(text, /^[A-Z2-7]{32}$/);
    assert.deepEqual(base32Decode(text), s);
  });
});

describe('otpauthUri', () => {
  it('builds the Key Uri Format with issuer label and parameters', () => {
    const uri = otpauthUri({ issuer: 'My App', account: 'a+b@example.com', secret: 'JBSWY3DPEHPK3PXP' });
    assert.equal(
      uri,
      'otpauth://totp/My%20App:a%2Bb%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=My%20App&algorithm=SHA1&digits=6&period=30',
    );
    const u = new URL(uri);
    assert.equal(u.searchParams.get('secret'), 'JBSWY3DPEHPK3PXP');
    assert.equal(u.searchParams.get('issuer'), 'My App');
  });
});
