/**
 * What an SVG may hold to be rasterised (IMAGE_SVG_ENABLED): nothing that makes librsvg reach outside
 * the document. librsvg resolves no relative reference for a document loaded from memory, but an
 * absolute `file:` or `http:` one, a `data:` image (a decompression bomb in disguise), an XInclude, an
 * external style sheet or an entity are all ways to make it read something; none is needed to draw an
 * icon or a logo, so a document with any of them is refused rather than rewritten.
 *
 * The check runs on the text after the XML character references are decoded (`&#117;rl(` is `url(`
 * to librsvg), and refuses CSS escapes outright (`\75 rl(` is `url(` to a CSS parser): a rule read on
 * the raw text alone could be walked around.
 */

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** The text with numeric character references and the five predefined entities replaced. */
export function decodeXmlReferences(text: string): string {
  return text.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|lt|gt|amp|quot|apos);/g, (ref, body: string) => {
    if (!body.startsWith('#')) return PREDEFINED[body] ?? ref;
    const code =
      body[1] === 'x' || body[1] === 'X' ? Number.parseInt(body.slice(2), 16) : Number(body.slice(1));
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : '\uFFFD';
  });
}

/** True for a reference to something inside the same document: `#id`. */
function internal(ref: string): boolean {
  return /^#[^\s]*$/.test(
    ref
      .trim()
      .replace(/^(["'])(.*)\1$/s, '$2')
      .trim(),
  );
}

/**
 * Why this SVG text must not be rasterised, as a phrase ("an external reference"), or undefined when
 * it holds only internal references.
 */
export function unsafeSvgReason(raw: string): string | undefined {
  // Entities would be expanded by the XML parser: the check below could not see through them, and they
  // are the means of the "billion laughs" and of external entities.
  if (/<!DOCTYPE|<!ENTITY/i.test(raw)) return 'a document type declaration';
  const text = decodeXmlReferences(raw);
  if (/<\?xml-stylesheet/i.test(text)) return 'an external style sheet';
  if (text.includes('\\')) return 'a CSS escape';
  if (/@import/i.test(text)) return 'a style sheet import';
  // href, xlink:href and any other prefix; XInclude's `href` too.
  for (const m of text.matchAll(/(?:^|[\s"'])(?:[\w.-]+:)?href\s*=\s*("[^"]*"|'[^']*')/gi)) {
    if (!internal(m[1] as string)) return 'an external reference';
  }
  // An href that is not a well-formed quoted attribute is not something the check can judge.
  if (/(?:^|[\s"'])(?:[\w.-]+:)?href\s*=\s*[^\s"']/i.test(text)) return 'an external reference';
  for (const m of text.matchAll(/url\s*\(([^)]*)\)?/gi)) {
    if (!internal(m[1] as string)) return 'an external reference';
  }
  return undefined;
}
