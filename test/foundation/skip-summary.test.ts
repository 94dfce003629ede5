/**
 * The end of `npm test` says which suites did not run and why (issue 21): node's summary alone said
 * "skipped 0" while the PostgreSQL and Redis suites had silently left themselves out.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { REPO_ROOT } from '../helpers/process.ts';

const REPORTER = './test/reporters/skips.mjs';

function runSuite(fixture: string, status = 0): string {
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      `--test-reporter=${REPORTER}`,
      path.join('test/foundation/fixtures', fixture),
    ],
    { cwd: REPO_ROOT, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } },
  );
  assert.equal(r.status, status, r.stderr);
  return r.stdout;
}

describe('the skip summary at the end of npm test', () => {
  it('names each suite that did not run, under the reason, after node summary', () => {
    const out = runSuite('skipping-suite.ts');
    const lines = out.trimEnd().split('\n');
    assert.ok(lines.includes('# skipped 1'), 'node counts the suite as skipped');
    const at = lines.indexOf('# skipped 1');
    assert.deepEqual(lines.slice(lines.length - 3), [
      '# not run: 1 skipped test(s) in 1 file(s), so this run is not complete',
      '#   because FIXTURE_THING is not set (a thing this fixture wants):',
      '#     the suite that needs a thing (test/foundation/fixtures/skipping-suite.ts)',
    ]);
    assert.ok(at < lines.length - 3, 'the summary comes last');
    assert.doesNotMatch(out, /the suite whose need is met/, 'a met need adds nothing');
  });

  it('says that nothing was left out when everything ran', () => {
    const out = runSuite('complete-suite.ts');
    assert.match(out, /# skipped 0\n[\s\S]*# not run: nothing — every suite ran\n$/);
  });

  it('repeats each failed test, with its file and message, before the not-run summary', () => {
    const out = runSuite('failing-suite.ts', 1);
    const tail = out.slice(out.lastIndexOf('# failed:'));
    assert.match(tail, /^# failed: 1 test\(s\)\n/);
    assert.match(tail, /# {3}test\/foundation\/fixtures\/failing-suite\.ts: fails with a message\n/);
    assert.match(tail, /# {7}AssertionError: arithmetic went wrong\n/);
    assert.doesNotMatch(
      tail,
      /a suite with one failure/,
      'the parent suite failing for its child adds nothing',
    );
    assert.match(tail, /# not run: nothing — every suite ran\n$/);
    assert.match(
      out,
      /# slowest files \(of 1\):\n#\s+[\d.]+ s {2}test\/foundation\/fixtures\/failing-suite\.ts\n/,
    );
  });

  it('says that no test failed when none did', () => {
    assert.match(runSuite('complete-suite.ts'), /# failed: none\n# not run: nothing/);
  });

  it('is the reporter of `npm test`', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    assert.match(pkg.scripts['test'] ?? '', new RegExp(`--test-reporter=${REPORTER.replace(/\./g, '\\.')} `));
  });
});
