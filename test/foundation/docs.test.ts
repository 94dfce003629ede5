import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CONFIG_DOC, renderConfigDoc } from '../../scripts/config-docs.ts';
import { REPO_ROOT } from '../helpers/process.ts';

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of markdown.matchAll(/^#{1,6}\s+(.*)$/gm)) {
    const base = anchor(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The Markdown pages of docs/, at any depth, from the repository's root. */
function docsPages(): string[] {
  return readdirSync(path.join(REPO_ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f.split(path.sep).join('/')}`)
    .sort();
}

/** The Markdown files a reader of the repository is sent to: the README and docs/. */
function markdownFiles(): string[] {
  return ['README.md', ...docsPages()];
}

const readme = () => readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');

describe('README and docs/', () => {
  it(`${CONFIG_DOC} lists every setting of src/config.ts (run \`npm run docs\` when this fails)`, () => {
    const doc = readFileSync(path.join(REPO_ROOT, CONFIG_DOC), 'utf8');
    assert.equal(renderConfigDoc(doc), doc);
  });

  it('stays a page a newcomer reads (250 lines at most); the reference lives in docs/', () => {
    const lines = readme().split('\n').length;
    assert.ok(lines <= 250, `README.md has ${lines} lines`);
    assert.ok(
      !readme().includes('<!-- config-table:start -->'),
      'the settings table is in docs/configuration.md',
    );
  });

  it('links every page of docs/, so no reference page is out of reach', () => {
    const linked = new Set(
      [...readme().matchAll(/\]\((docs\/[^)#\s]+\.md)(?:#[^)\s]*)?\)/g)].map((m) => m[1] as string),
    );
    assert.deepEqual(
      docsPages().filter((p) => !linked.has(p)),
      [],
    );
  });

  it('and the guides in docs/ link only to files of the repository, and to anchors that exist', () => {
    const problems: string[] = [];
    for (const file of markdownFiles()) {
      const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
      // Inline links and images, outside code spans and blocks.
      const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
      for (const m of prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = m[1] as string;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
          problems.push(`${file}: ${target} leaves the repository`);
          continue;
        }
        const [rel = '', hash] = target.split('#');
        const resolved =
          rel === '' ? path.join(REPO_ROOT, file) : path.resolve(REPO_ROOT, path.dirname(file), rel);
        if (!resolved.startsWith(REPO_ROOT) || !existsSync(resolved)) {
          problems.push(`${file}: ${target} is not a file of the repository`);
          continue;
        }
        if (hash && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(hash))
          problems.push(`${file}: ${target} names no heading of ${path.relative(REPO_ROOT, resolved)}`);
      }
      // A path named in the text (in backticks too) that climbs out of the repository.
      const named = text.replace(/```[\s\S]*?```/g, '');
      for (const m of named.matchAll(/(?<![\w.])(?:\.\.\/)+[\w./-]+/g))
        if (!path.resolve(REPO_ROOT, path.dirname(file), m[0]).startsWith(REPO_ROOT))
          problems.push(`${file}: ${m[0]} points outside the repository`);
    }
    assert.deepEqual(problems, []);
  });
});
