import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { renderReadme } from '../../scripts/config-docs.ts';

describe('README', () => {
  it('lists every setting of src/config.ts (run `npm run docs` when this fails)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    assert.equal(renderReadme(readme), readme);
  });
});
