import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../errors.ts';
import { chooseFormat, isTransformRequest, normalisedKey, parseImageParams } from './params.ts';

function refused(query: Record<string, unknown>, message: string): void {
  assert.throws(
    () => parseImageParams(query),
    (err: unknown) =>
      err instanceof AppError &&
      err.statusCode === 400 &&
      err.code === 'VALIDATION' &&
      err.message === message,
    `expected 400 "${message}" for ${JSON.stringify(query)}`,
  );
}

describe('image parameters', () => {
  describe('isTransformRequest', () => {
    it('is true when any of w, h, q, f, r, b is given and non-empty', () => {
      for (const k of ['w', 'h', 'q', 'f', 'r', 'b']) assert.equal(isTransformRequest({ [k]: '1' }), true, k);
    });

    it('is false for token alone, unknown parameters, or empty values', () => {
      assert.equal(isTransformRequest({}), false);
      assert.equal(isTransformRequest({ token: 'abc' }), false);
      assert.equal(isTransformRequest({ v: '2', cachebuster: 'x' }), false);
      assert.equal(isTransformRequest({ w: '', h: '' }), false);
    });
  });

  describe('accepted values', () => {
    it('parses every parameter at both ends of its range', () => {
      assert.deepEqual(parseImageParams({ w: '1', h: '8192', q: '1', f: 'webp', r: '0', b: '0.3' }), {
        width: 1,
        height: 8192,
        quality: 1,
        format: 'webp',
        blur: 0.3,
      });
      assert.deepEqual(parseImageParams({ w: '8192', q: '100', r: 'full', b: '1000' }), {
        width: 8192,
        quality: 100,
        radius: 'full',
        blur: 1000,
      });
    });

    it('treats w=0 and h=0 as "follow the aspect ratio"', () => {
      assert.deepEqual(parseImageParams({ w: '0', h: '0' }), {});
      assert.deepEqual(parseImageParams({ w: '0', h: '40' }), { height: 40 });
    });

    it('accepts decimal blur sigmas', () => {
      assert.equal(parseImageParams({ b: '2.75' }).blur, 2.75);
      assert.equal(parseImageParams({ b: '.5' }).blur, 0.5);
    });

    it('accepts every format, case-insensitively, and jpg for jpeg', () => {
      for (const f of ['webp', 'png', 'jpeg', 'avif', 'auto'])
        assert.equal(parseImageParams({ f }).format, f);
      assert.equal(parseImageParams({ f: 'JPG' }).format, 'jpeg');
    });

    it('keeps a positive integer radius and drops r=0', () => {
      assert.equal(parseImageParams({ r: '12' }).radius, 12);
      assert.equal(parseImageParams({ r: '0' }).radius, undefined);
      assert.equal(parseImageParams({ r: 'FULL' }).radius, 'full');
    });

    it('ignores unknown parameters and token', () => {
      assert.deepEqual(parseImageParams({ w: '10', token: 'x', v: 'cache-buster', zzz: ['1', '2'] }), {
        width: 10,
      });
    });

    it('treats empty values as absent', () => {
      assert.deepEqual(parseImageParams({ w: '10', h: '', q: '' }), { width: 10 });
    });
  });

  describe('refused values (400 naming the parameter and its range)', () => {
    const dims = 'an integer from 0 to 8192';
    for (const name of ['w', 'h']) {
      for (const bad of ['8193', '-1', '1.5', 'abc', '1e3', '0x10', '99999999999']) {
        it(`refuses ${name}=${bad}`, () => refused({ [name]: bad }, `"${name}" must be ${dims}`));
      }
    }
    for (const bad of ['0', '101', '-5', '50.5', 'high']) {
      it(`refuses q=${bad}`, () => refused({ q: bad }, '"q" must be an integer from 1 to 100'));
    }
    for (const bad of ['gif', 'tiff', 'webpp', 'svg']) {
      it(`refuses f=${bad}`, () => refused({ f: bad }, '"f" must be one of webp, png, jpeg, avif, auto'));
    }
    for (const bad of ['-1', '2.5', 'round', 'half']) {
      it(`refuses r=${bad}`, () => refused({ r: bad }, '"r" must be an integer of 0 or more, or "full"'));
    }
    for (const bad of ['0', '0.2', '0.29', '1000.5', '1001', '-1', 'x', '1e2']) {
      it(`refuses b=${bad}`, () => refused({ b: bad }, '"b" must be a number from 0.3 to 1000'));
    }

    it('refuses a parameter given twice', () => {
      refused({ w: ['10', '20'] }, '"w" must be given once');
    });
  });

  describe('format negotiation', () => {
    it('keeps the source format when f is absent, without Vary', () => {
      assert.deepEqual(chooseFormat(undefined, 'image/webp'), { choice: 'source', vary: false });
    });

    it('uses an explicit format whatever Accept says', () => {
      assert.deepEqual(chooseFormat('png', 'image/webp'), { choice: 'png', vary: false });
    });

    it('picks WebP for f=auto when Accept names image/webp', () => {
      assert.deepEqual(chooseFormat('auto', 'image/avif,image/webp,image/apng,*/*;q=0.8'), {
        choice: 'webp',
        vary: true,
      });
    });

    it('picks AVIF for f=auto when Accept names image/avif only', () => {
      assert.deepEqual(chooseFormat('auto', 'image/avif,*/*'), { choice: 'avif', vary: true });
    });

    it('keeps the source format for f=auto without Accept, with wildcards only, or with q=0', () => {
      assert.deepEqual(chooseFormat('auto', undefined), { choice: 'source', vary: true });
      assert.deepEqual(chooseFormat('auto', 'image/*,*/*'), { choice: 'source', vary: true });
      assert.deepEqual(chooseFormat('auto', 'image/webp;q=0, image/png'), { choice: 'source', vary: true });
    });
  });

  describe('normalisedKey', () => {
    it('is equal for requests that must give the same bytes', () => {
      const a = parseImageParams({ w: '100', b: '1.50', v: 'x' });
      const b = parseImageParams({ b: '1.5', h: '0', w: '0100' });
      assert.equal(normalisedKey(a, 'source'), normalisedKey(b, 'source'));
    });

    it('differs when a parameter or the chosen format differs', () => {
      const p = parseImageParams({ w: '100' });
      assert.notEqual(normalisedKey(p, 'webp'), normalisedKey(p, 'source'));
      assert.notEqual(normalisedKey(p, 'png'), normalisedKey(parseImageParams({ w: '101' }), 'png'));
    });
  });
});
