#!/usr/bin/env node
/**
 * Builds the tree `npm test` runs: TypeScript's compiler type-checks the whole project and writes plain
 * JavaScript to .tmp/test-build/ (the same layout as the checkout, imports rewritten from .ts to .js), and
 * every other file of the checkout (SQL migrations, console assets, fixtures, docs, the sources themselves
 * for the suites that read them) is hard-linked beside it. Loading the suites through tsx cost about two
 * seconds of CPU per test file and per spawned service: the loader's hooks resolve each of ~1,100 modules
 * on another thread. Plain JavaScript, so that it runs before any TypeScript loader is in place.
 *
 * It also writes the list of test files `npm test` runs, longest first (test-files.txt): node --test
 * starts them in the order given, two at a time, and a long file started last would run alone at the
 * end while the other core idles. The durations are those of the last run on this machine
 * (.tmp/test-durations.json, written by test/reporters/skips.mjs), else those of test/durations.json.
 */
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const OUT = path.join(ROOT, '.tmp', 'test-build');
/**
 * Top-level entries that are not part of the project's files (or are this build's own output); biome.json
 * too, since biome refuses a second root configuration below the first.
 */
const LEFT_OUT = new Set(['.git', 'node_modules', '.tmp', 'dist', 'data', 'coverage', 'biome.json']);

function linkTree(from, to) {
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const name = entry.name;
    if (from === ROOT && (LEFT_OUT.has(name) || (name.startsWith('.env') && name !== '.env.example')))
      continue;
    const source = path.join(from, name);
    const target = path.join(to, name);
    if (entry.isDirectory()) {
      if (name === 'node_modules') continue;
      mkdirSync(target, { recursive: true });
      linkTree(source, target);
    } else if (entry.isFile() && !existsSync(target)) {
      try {
        linkSync(source, target);
      } catch {
        copyFileSync(source, target);
      }
    }
  }
}

rmSync(OUT, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
try {
  execFileSync(
    process.execPath,
    [tsc, '-p', 'tsconfig.json', '--noEmit', 'false', '--outDir', OUT, '--rootDir', '.'],
    { cwd: ROOT, stdio: 'inherit' },
  );
} catch {
  process.stderr.write('test-build: the type check failed; no test was run\n');
  process.exit(1);
}
linkTree(ROOT, OUT);
symlinkSync(path.join(ROOT, 'node_modules'), path.join(OUT, 'node_modules'), 'dir');

/** Seconds per test file (path relative to the checkout, .js); `{}` when the file is missing or unreadable. */
function durations(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
}

function testFiles(dir, rel = '') {
  const found = [];
  for (const entry of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const name = path.posix.join(rel, entry.name);
    if (entry.isDirectory()) found.push(...testFiles(dir, name));
    else if (entry.name.endsWith('.test.js')) found.push(name);
  }
  return found;
}

const seconds = {
  ...durations(path.join(ROOT, 'test', 'durations.json')),
  ...durations(path.join(ROOT, '.tmp', 'test-durations.json')),
};
/** A file without a record (a new one) counts as an average file. */
const UNKNOWN_S = 5;
const files = [...testFiles(OUT, 'src'), ...testFiles(OUT, 'test')].sort();
files.sort((a, b) => (seconds[b] ?? UNKNOWN_S) - (seconds[a] ?? UNKNOWN_S));
writeFileSync(path.join(OUT, 'test-files.txt'), `${files.join('\n')}\n`);
