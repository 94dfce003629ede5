import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importCycles, importGraph, layeringViolations } from '../../scripts/import-graph.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('import graph', () => {
  const graph = importGraph(root, ['src', 'test', 'bench', 'scripts']);

  it('has no import cycle in src, test, bench or scripts', () => {
    assert.ok(graph.size > 100, `only ${graph.size} files found`);
    assert.deepEqual(importCycles(graph), []);
  });

  it('keeps mail/ a leaf and auth on its mail port', () => {
    assert.deepEqual(layeringViolations(graph), []);
    assert.ok(![...graph.keys()].some((f) => f.startsWith('src/mail/flows/')), 'mail/flows/ is gone');
  });

  it('finds a cycle and a layering break when there is one', () => {
    const bad = new Map([
      ['src/a.ts', ['src/b.ts']],
      ['src/b.ts', ['src/c.ts']],
      ['src/c.ts', ['src/a.ts']],
      ['src/mail/mailer.ts', ['src/auth/sessions.ts']],
      ['src/auth/sessions.ts', []],
    ]);
    assert.deepEqual(importCycles(bad), [['src/a.ts', 'src/b.ts', 'src/c.ts']]);
    assert.equal(layeringViolations(bad).length, 1);
  });
});
