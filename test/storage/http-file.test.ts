/**
 * Pure pieces of the file routes: key parsing, range parsing, conditional requests and type sniffing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectInfo } from '../../src/storage/backends/object-store.ts';
import {
  contentDisposition,
  ifRangeMatches,
  isInline,
  isNotModified,
  parseRange,
} from '../../src/storage/http-file.ts';
import { parseKey } from '../../src/storage/keys.ts';
import { chooseContentType, sniff } from '../../src/storage/sniff.ts';

const info: ObjectInfo = {
  key: 'a/b',
  size: 10,
  lastModified: new Date('2026-01-01T10:00:00.500Z'),
  etag: '"abc"',
  contentType: 'text/plain',
  token: 't',
};

describe('parseKey', () => {
  it('decodes once and tells files from folders', () => {
    assert.deepEqual(parseKey('a%20b/C%25d'), { key: 'a b/C%d', folder: false, path: '/a b/C%d' });
    assert.deepEqual(parseKey('a/b/'), { key: 'a/b/', folder: true, path: '/a/b/' });
    assert.deepEqual(parseKey(''), { key: '', folder: true, path: '/' });
  });

  for (const bad of [
    '/',
    '/a',
    'a//b',
    'a/./b',
    'a/../b',
    '..',
    'a/..',
    'a\\b',
    'a%5Cb',
    'a%00',
    'a%1F',
    'a%7F',
    'a%C2%85',
    '%E9',
    '%',
    'a%2F..%2Fb',
    'x'.repeat(1025),
  ]) {
    it(`refuses ${JSON.stringify(bad.slice(0, 20))}`, () => {
      assert.throws(
        () => parseKey(bad),
        (err: { code?: string }) => err.code === 'INVALID_KEY',
      );
    });
  }
});

describe('parseRange', () => {
  it('parses one range and clamps its end', () => {
    assert.deepEqual(parseRange('bytes=0-0', 10), { kind: 'partial', start: 0, end: 0 });
    assert.deepEqual(parseRange('bytes=3-', 10), { kind: 'partial', start: 3, end: 9 });
    assert.deepEqual(parseRange('bytes=-20', 10), { kind: 'partial', start: 0, end: 9 });
    assert.deepEqual(parseRange('bytes=5-999', 10), { kind: 'partial', start: 5, end: 9 });
  });
  it('calls ranges past the end unsatisfiable, and any range of an empty file', () => {
    assert.deepEqual(parseRange('bytes=10-', 10), { kind: 'unsatisfiable' });
    assert.deepEqual(parseRange('bytes=-0', 10), { kind: 'unsatisfiable' });
    assert.deepEqual(parseRange('bytes=0-', 0), { kind: 'unsatisfiable' });
  });
  it('ignores what it does not understand', () => {
    for (const h of [
      undefined,
      '',
      'bytes=',
      'bytes=-',
      'bytes=4-2',
      'bytes=0-1,3-4',
      'pages=1-2',
      'bytes=a-b',
    ]) {
      assert.deepEqual(parseRange(h, 10), { kind: 'full' }, String(h));
    }
  });
});

describe('conditional requests', () => {
  it('matches If-None-Match weakly, in lists and with *', () => {
    assert.equal(isNotModified({ 'if-none-match': '"abc"' }, info), true);
    assert.equal(isNotModified({ 'if-none-match': 'W/"abc"' }, info), true);
    assert.equal(isNotModified({ 'if-none-match': '"x", "abc"' }, info), true);
    assert.equal(isNotModified({ 'if-none-match': '*' }, info), true);
    assert.equal(isNotModified({ 'if-none-match': '"x"' }, info), false);
  });
  it('lets If-None-Match win over If-Modified-Since, compared to the second', () => {
    assert.equal(
      isNotModified({ 'if-none-match': '"x"', 'if-modified-since': info.lastModified.toUTCString() }, info),
      false,
    );
    assert.equal(isNotModified({ 'if-modified-since': info.lastModified.toUTCString() }, info), true);
    assert.equal(isNotModified({ 'if-modified-since': 'Thu, 01 Jan 2026 09:59:59 GMT' }, info), false);
    assert.equal(isNotModified({ 'if-modified-since': 'garbage' }, info), false);
  });
  it('honours If-Range only with a strong matching ETag or a current date', () => {
    assert.equal(ifRangeMatches(undefined, info), true);
    assert.equal(ifRangeMatches('"abc"', info), true);
    assert.equal(ifRangeMatches('W/"abc"', info), false);
    assert.equal(ifRangeMatches('"zzz"', info), false);
    assert.equal(ifRangeMatches(info.lastModified.toUTCString(), info), true);
  });
});

describe('presentation', () => {
  it('shows only passive types inline', () => {
    for (const t of [
      'image/png',
      'image/jpeg',
      'video/mp4',
      'audio/mpeg',
      'application/pdf',
      'text/plain; charset=utf-8',
    ]) {
      assert.equal(isInline(t), true, t);
    }
    for (const t of [
      'text/html',
      'image/svg+xml',
      'application/xml',
      'text/xml',
      'text/javascript',
      'application/javascript',
      'application/xhtml+xml',
      'application/octet-stream',
    ]) {
      assert.equal(isInline(t), false, t);
    }
  });
  it('writes RFC 6266 dispositions with an ASCII fallback', () => {
    assert.equal(
      contentDisposition('inline', 'a b.png'),
      `inline; filename="a b.png"; filename*=UTF-8''a%20b.png`,
    );
    assert.equal(
      contentDisposition('attachment', 'é"x.txt'),
      `attachment; filename="__x.txt"; filename*=UTF-8''%C3%A9%22x.txt`,
    );
  });
});

describe('sniff', () => {
  it('recognises common formats and active markup', () => {
    assert.equal(sniff(Buffer.from('89504e470d0a1a0a0000', 'hex')), 'image/png');
    assert.equal(sniff(Buffer.from('ffd8ffe0', 'hex')), 'image/jpeg');
    assert.equal(sniff(Buffer.from('GIF89a....')), 'image/gif');
    assert.equal(sniff(Buffer.from('RIFF\0\0\0\0WEBPVP8 ')), 'image/webp');
    assert.equal(sniff(Buffer.from('\0\0\0\x1cftypavif')), 'image/avif');
    assert.equal(sniff(Buffer.from('%PDF-1.7')), 'application/pdf');
    assert.equal(sniff(Buffer.from('PK\x03\x04')), 'application/zip');
    assert.equal(sniff(Buffer.from('  <!DOCTYPE html><p>')), 'text/html');
    assert.equal(sniff(Buffer.from('\ufeff<svg xmlns="http://www.w3.org/2000/svg">')), 'image/svg+xml');
    assert.equal(sniff(Buffer.from('<?xml version="1.0"?><svg>')), 'image/svg+xml');
    assert.equal(sniff(Buffer.from('<?xml version="1.0"?><feed/>')), 'application/xml');
    assert.equal(sniff(Buffer.from('{"a": [1, 2]}')), 'application/json');
    assert.equal(sniff(Buffer.from('just some words')), 'text/plain');
    assert.equal(sniff(Buffer.from([0, 1, 2, 3, 0xff])), undefined);
  });
  it('keeps a specific claim and replaces a missing, generic or malformed one', () => {
    const png = Buffer.from('89504e470d0a1a0a', 'hex');
    assert.equal(chooseContentType('image/x-custom', png), 'image/x-custom');
    assert.equal(chooseContentType(undefined, png), 'image/png');
    assert.equal(chooseContentType('application/octet-stream', png), 'image/png');
    assert.equal(chooseContentType('not a type', png), 'image/png');
    assert.equal(chooseContentType('', Buffer.from([0, 1, 2])), 'application/octet-stream');
  });
});
