import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeXmlReferences, unsafeSvgReason } from './svg.ts';

const wrap = (body: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10">${body}</svg>`;

describe('SVG safety check', () => {
  it('accepts shapes, gradients, filters and references inside the document', () => {
    const svg = wrap(
      '<defs><linearGradient id="g"><stop offset="0" stop-color="red"/></linearGradient>' +
        '<filter id="f"><feGaussianBlur stdDeviation="2"/></filter><path id="p" d="M0 0L5 5"/></defs>' +
        '<rect width="10" height="10" fill="url(#g)" filter="url( \'#f\' )"/><use xlink:href="#p"/><use href="#p"/>' +
        '<style>rect { fill: url("#g"); }</style><text>a &amp; b &#169;</text>',
    );
    assert.equal(unsafeSvgReason(svg), undefined);
  });

  const refused: [string, string][] = [
    ['an http image', '<image href="http://127.0.0.1/x.png"/>'],
    ['a file image through xlink', '<image xlink:href="file:///etc/passwd"/>'],
    ['a data: image', '<image href="data:image/png;base64,AAAA"/>'],
    ['a relative file', "<image href='secret.png'/>"],
    [
      'an XInclude',
      '<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="/etc/passwd" parse="text"/>',
    ],
    ['a CSS url()', '<rect style="fill: url(http://127.0.0.1/a)"/>'],
    ['a CSS url() hidden behind character references', '<rect style="fill: &#117;rl(http://x/a)"/>'],
    ['a CSS escape', '<style>rect { fill: \\75 rl(http://x/a) }</style>'],
    ['an @import', '<style>@import "http://x/a.css";</style>'],
    ['an external style sheet', '<?xml-stylesheet href="http://x/a.css"?>'],
    ['a feImage of a URL', '<filter id="f"><feImage href="http://x/a.png"/></filter>'],
    ['an href hidden behind character references', '<image href="&#104;ttp://x/a.png"/>'],
  ];
  for (const [what, body] of refused) {
    it(`refuses ${what}`, () => {
      assert.notEqual(unsafeSvgReason(wrap(body)), undefined);
    });
  }

  it('refuses a document type declaration (entities: billion laughs, external entities)', () => {
    const svg = `<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaa">]>${wrap('<text>&a;</text>')}`;
    assert.equal(unsafeSvgReason(svg), 'a document type declaration');
  });

  it('decodes numeric and predefined references', () => {
    assert.equal(decodeXmlReferences('&#117;&#x72;&#X6C;&lt;&amp;&unknown;'), 'url<&&unknown;');
  });
});
