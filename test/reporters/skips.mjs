/**
 * node:test reporter for `npm test`: node's own output (spec on a terminal, TAP otherwise, as without a
 * reporter option), followed by a summary of what did not run and why. A suite that cannot run on this
 * machine registers a skipped test carrying the reason (test/helpers/requirements.ts), so the summary
 * lists every suite left out, grouped by reason, and never claims a full run when whole suites were
 * skipped. Before that, it repeats each failed test with its file and the first lines of its error, and
 * names the slowest files: CI shows only the end of the output, and a failure far up in thousands of TAP
 * lines would otherwise be invisible there. Plain JavaScript, so that node can load it before any
 * TypeScript loader is in place.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { spec, tap } from 'node:test/reporters';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** The summary lines for the skipped tests, `#`-prefixed so that TAP readers take them as comments. */
export function skipSummary(skipped) {
  if (skipped.length === 0) return ['# not run: nothing — every suite ran'];
  const byReason = new Map();
  for (const s of skipped) {
    const list = byReason.get(s.reason) ?? [];
    list.push(s);
    byReason.set(s.reason, list);
  }
  const files = new Set(skipped.map((s) => s.file));
  const lines = [
    `# not run: ${skipped.length} skipped test(s) in ${files.size} file(s), so this run is not complete`,
  ];
  for (const [reason, list] of byReason) {
    lines.push(`#   because ${reason}:`);
    for (const s of list)
      lines.push(s.name.endsWith(`(${s.file})`) ? `#     ${s.name}` : `#     ${s.file}: ${s.name}`);
  }
  return lines;
}

/** The first lines of a failure's error, without the stack, `#`-prefixed. */
function errorLines(error) {
  const cause = error?.cause ?? error;
  const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause ?? error?.message);
  return text
    .split('\n')
    .slice(0, 8)
    .map((l) => `#       ${l}`);
}

/** The summary lines for the failed tests (leaves only: a suite failing because a child did adds nothing). */
export function failureSummary(failed) {
  if (failed.length === 0) return ['# failed: none'];
  const lines = [`# failed: ${failed.length} test(s)`];
  for (const f of failed) lines.push(`#   ${f.file}: ${f.name}`, ...f.lines);
  return lines;
}

/** The slowest test files by the summed duration of their top-level tests. */
export function slowestSummary(durations, count = 8) {
  const top = [...durations].sort((a, b) => b[1] - a[1]).slice(0, count);
  if (top.length === 0) return [];
  return [
    `# slowest files (of ${durations.size}):`,
    ...top.map(([file, ms]) => `#   ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`),
  ];
}

/**
 * Records each file's duration in seconds in .tmp/test-durations.json beside the test build, merged into
 * the earlier records: scripts/test-build.mjs starts the longest files first. Only in the test build.
 */
export function recordDurations(durations, root = ROOT) {
  if (path.basename(root) !== 'test-build') return;
  const file = path.join(root, '..', 'test-durations.json');
  let known = {};
  try {
    known = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    // No record yet.
  }
  // Test files only: the reporter's own suite runs it on fixtures too.
  for (const [name, ms] of durations) if (name.endsWith('.test.js')) known[name] = Math.round(ms / 100) / 10;
  try {
    writeFileSync(file, `${JSON.stringify(known, null, 2)}\n`);
  } catch {
    // The order is an optimisation; a read-only checkout runs the files in the recorded or default order.
  }
}

export default async function* skipsReporter(source) {
  const skipped = [];
  const failed = [];
  const durations = new Map();
  async function* watch() {
    for await (const event of source) {
      const file = event.data?.file ? path.relative(ROOT, event.data.file) : '(unknown file)';
      if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0)
        durations.set(file, (durations.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
      if (event.type === 'test:fail' && event.data.details?.error?.failureType !== 'subtestsFailed')
        failed.push({ file, name: event.data.name, lines: errorLines(event.data.details?.error) });
      if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.skip !== undefined) {
        const reason = typeof event.data.skip === 'string' ? event.data.skip : 'skipped without a reason';
        // Tests registered by test/helpers/requirements.ts end their name with their file.
        const named = /\(([^()]+\.[mc]?[jt]s)\)$/.exec(event.data.name)?.[1];
        skipped.push({ name: event.data.name, reason, file: named ?? file });
      }
      yield event;
    }
  }
  if (process.stdout.isTTY) {
    for await (const chunk of Readable.from(watch()).pipe(spec())) yield chunk;
  } else {
    yield* tap(watch());
  }
  recordDurations(durations);
  const lines = [...slowestSummary(durations), ...failureSummary(failed), ...skipSummary(skipped)];
  yield `${lines.join('\n')}\n`;
}
