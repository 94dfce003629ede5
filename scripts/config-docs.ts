/**
 * Writes the configuration table into README.md between the config-table markers, from the settings
 * declared in src/config.ts. `--check` exits 1 when the README is out of date (a test runs it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describeSettings } from '../src/config.ts';

const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';

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

export function renderReadme(readme: string): string {
  const a = readme.indexOf(START);
  const b = readme.indexOf(END);
  if (a < 0 || b < 0) throw new Error('README.md has no config-table markers');
  return readme.slice(0, a) + configTable() + readme.slice(b + END.length);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = new URL('../README.md', import.meta.url);
  const current = readFileSync(file, 'utf8');
  const next = renderReadme(current);
  if (process.argv.includes('--check')) {
    if (next !== current) {
      process.stderr.write('README.md configuration table is out of date: run npm run docs\n');
      process.exit(1);
    }
  } else writeFileSync(file, next);
}
