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

  it('keeps mail/ a leaf, auth on its mail port, and route files away from the database and stores', () => {
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
      ['src/auth/routes/login.ts', ['src/auth/accounts-store.ts', 'src/storage/backends/object-store.ts']],
      ['src/storage/routes/get-file.ts', ['src/storage/backends/s3.ts']],
    ]);
    assert.deepEqual(importCycles(bad), [['src/a.ts', 'src/b.ts', 'src/c.ts']]);
    assert.deepEqual(
      layeringViolations(bad).map((v) => v.split(':')[0]),
      [
        'src/mail/mailer.ts → src/auth/sessions.ts',
        'src/auth/routes/login.ts → src/auth/accounts-store.ts',
        'src/storage/routes/get-file.ts → src/storage/backends/s3.ts',
      ],
    );
  });
});
