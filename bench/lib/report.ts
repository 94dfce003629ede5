/** One row of the benchmark table: a service figure next to its same-run baseline. */
export interface Row {
  scenario: string;
  /** What `service` and `baseline` measure, e.g. "req/s", "MB/s", "ms". */
  unit: string;
  service: number;
  baseline: number;
  /** service / baseline. */
  ratio: number;
  /** Human-readable goal, e.g. ">= 0.85x". */
  goal: string;
  met: boolean;
  /** Extra figures: latencies, RSS, parameters. */
  details: Record<string, string | number>;
}

export function row(
  scenario: string,
  unit: string,
  service: number,
  baseline: number,
  goal: { kind: 'min-ratio' | 'max-ratio' | 'max-value' | 'none'; value: number },
  details: Record<string, string | number> = {},
): Row {
  const ratio = baseline > 0 ? service / baseline : Number.NaN;
  const checks: Record<typeof goal.kind, [boolean, string]> = {
    'min-ratio': [ratio >= goal.value, `>= ${goal.value}x`],
    'max-ratio': [ratio <= goal.value, `<= ${goal.value}x`],
    'max-value': [service <= goal.value, `<= ${goal.value} ${unit}`],
    none: [true, 'reported only'],
  };
  const [met, text] = checks[goal.kind];
  return { scenario, unit, service, baseline, ratio, goal: text, met, details };
}

const fmt = (n: number) => (Number.isFinite(n) ? (Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(2)) : 'n/a');

export function table(rows: Row[]): string {
  const head = ['Scenario', 'Service', 'Baseline', 'Ratio', 'Goal', 'Met', 'Details'];
  const body = rows.map((r) => [
    r.scenario,
    `${fmt(r.service)} ${r.unit}`,
    `${fmt(r.baseline)} ${r.unit}`,
    `${fmt(r.ratio)}x`,
    r.goal,
    r.met ? 'yes' : 'NO',
    Object.entries(r.details)
      .map(([k, v]) => `${k}=${typeof v === 'number' ? fmt(v) : v}`)
      .join(' '),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)].join('\n');
}

export const MB = 1024 * 1024;
