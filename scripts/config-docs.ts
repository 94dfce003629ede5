/**
 * Writes the configuration table into docs/configuration.md between the config-table markers, from the
 * settings declared in src/config.ts. `--check` exits 1 when the page is out of date (a test checks the same).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describeSettings } from '../src/config.ts';

const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';
/** The page that holds the table, from the repository's root. */
export const CONFIG_DOC = 'docs/configuration.md';

export function configTable(): string {
  const rows = describeSettings();
  const groups = [...new Set(rows.map((r) => r.group))];
  const out: string[] = [];
  for (const g of groups) {
    out.push(`\n**${g}**\n`, '| Setting | Default | Meaning |', '|---|---|---|');
    for (const r of rows.filter((x) => x.group === g)) {
      const names = [r.name, ...r.aliases].map((n) => `\`${n}\``).join(' / ');
      const dflt = r.defaultDoc ?? (r.default === '' ? '—' : `\`${r.default.replace(/\|/g, '\\|')}\``);
      out.push(`| ${names} | ${dflt} | ${r.doc.replace(/\|/g, '\\|')} |`);
    }
  }
  return `${START}\n${out.join('\n')}\n\n${END}`;
}

/** The page `doc` with its configuration table replaced by the current one. */
export function renderConfigDoc(doc: string): string {
  const a = doc.indexOf(START);
  const b = doc.indexOf(END);
  if (a < 0 || b < 0) throw new Error(`${CONFIG_DOC} has no config-table markers`);
  return doc.slice(0, a) + configTable() + doc.slice(b + END.length);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = new URL(`../${CONFIG_DOC}`, import.meta.url);
  const current = readFileSync(file, 'utf8');
  const next = renderConfigDoc(current);
  if (process.argv.includes('--check')) {
    if (next !== current) {
      process.stderr.write(`${CONFIG_DOC}: the configuration table is out of date: run npm run docs\n`);
      process.exit(1);
    }
  } else writeFileSync(file, next);
}
