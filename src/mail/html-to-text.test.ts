import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { htmlToText } from './html-to-text.ts';

describe('htmlToText', () => {
  it('keeps paragraphs and writes links as label (url)', () => {
    const text = htmlToText(
      '<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Hi &amp; welcome</h1><p>Click <a href="https://a.test/x?a=1&amp;b=2">here</a>.</p><p>Or <a href="https://a.test/y">https://a.test/y</a><br>Bye</p></body></html>',
    );
    assert.equal(
      text,
      'Hi & welcome\n\nClick here (https://a.test/x?a=1&b=2).\n\nOr https://a.test/y\nBye\n',
    );
  });
});
