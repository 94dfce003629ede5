/**
 * node:test reporter for `npm test`: node's own output (spec on a terminal, TAP otherwise, as without a
 * reporter option), followed by a summary of what did not run and why. A suite that cannot run on this
 * machine registers a skipped test carrying the reason (test/helpers/requirements.ts), so the summary
 * lists every suite left out, grouped by reason, and never claims a full run when whole suites were
 * skipped. Plain JavaScript, so that node can load it before any TypeScript loader is in place.
 */
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

export default async function* skipsReporter(source) {
  const skipped = [];
  async function* watch() {
    for await (const event of source) {
      if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.skip !== undefined) {
        const reason = typeof event.data.skip === 'string' ? event.data.skip : 'skipped without a reason';
        // Tests registered by test/helpers/requirements.ts end their name with their file.
        const named = /\(([^()]+\.[mc]?[jt]s)\)$/.exec(event.data.name)?.[1];
        const file = named ?? (event.data.file ? path.relative(ROOT, event.data.file) : '(unknown file)');
        skipped.push({ name: event.data.name, reason, file });
      }
      yield event;
    }
  }
  if (process.stdout.isTTY) {
    for await (const chunk of Readable.from(watch()).pipe(spec())) yield chunk;
  } else {
    yield* tap(watch());
  }
  yield `${skipSummary(skipped).join('\n')}\n`;
}
